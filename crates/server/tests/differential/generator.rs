//! The command generator of the differential test: seeded, so a case is
//! reproduced from its seed alone, and working over a handful of keys and
//! databases so that commands keep colliding on the same keys.
//!
//! Each generated command carries the [`Check`] the runner applies to its
//! reply. `Check::Exact` (byte-exact RESP) is the default; every other
//! variant is one documented class of nondeterminism:
//!
//! - **Relative time.** `EX`/`PX`/`EXPIRE`/`PEXPIRE`/`SETEX`/... add the
//!   server's clock, which differs between the two servers by the time
//!   between the two sends. So `TTL`/`PTTL` compare only as classes
//!   (-2 missing, -1 no expiry, positive), and `EXPIRETIME`/`PEXPIRETIME`
//!   compare exactly only when the expiry came from an absolute time. The
//!   generator makes that decidable without a model: every absolute future
//!   time it emits lies after [`ABSOLUTE_EPOCH_S`] (year 2096) and every
//!   relative one lands well before it.
//!   Relative TTLs are drawn without replacement from values 97 s apart, so
//!   `GT`/`LT` comparisons between two relative expiries never race.
//! - **Iteration order.** `KEYS` replies compare as sorted lists; `SCAN`
//!   is iterated to completion on each server and the sorted, deduplicated
//!   unions compare (Redis may return a key twice, and cursors are opaque).
//! - **Randomness.** `RANDOMKEY` compares only as "null" vs "some key that
//!   exists".
//! - **Collections.** A hashtable-encoded hash or set iterates in its own
//!   order on each server, so `SMEMBERS`, the set algebra, `HKEYS`,
//!   `HVALS` compare sorted, `HGETALL` as sorted pairs, `HSCAN`/`SSCAN`
//!   (one call with a large COUNT) by their sorted elements;
//!   `SRANDMEMBER`/`HRANDFIELD` by the shape of the reply. `SPOP` is only
//!   generated where its effect is determined (a count that takes every
//!   member, or an error), so the data stay comparable.
//! - **Server identity.** The `HELLO 3` reply (version, client id) is not
//!   compared.
//! - **Scripts** (`script_gen.rs`) are deterministic by construction: no
//!   time, no `math.random`, no hash-ordered replies; the runner flushes
//!   the script cache and the function libraries before each sequence.
//!
//! `INCRBYFLOAT` is compared exactly on every key: Redis adds in C `long
//! double`, which on this oracle (Debian amd64) is x87 80-bit, and ferrokv
//! emulates exactly that. (A Redis built for arm64 would answer differently
//! for e.g. `9223372036854775806` + `1e3`; such a build is not our oracle.)
//! [`FLOAT_KEY`] only ever holds float-like values, so increments pile up
//! there instead of failing on text.

#[path = "script_gen.rs"]
mod script_gen;
pub use script_gen::scripts_enabled;
#[path = "bitmap_gen.rs"]
mod bitmap_gen;
#[path = "dump_gen.rs"]
mod dump_gen;
#[path = "geo_gen.rs"]
mod geo_gen;
#[path = "hll_gen.rs"]
mod hll_gen;
#[path = "newer_gen.rs"]
mod newer_gen;
#[path = "sort_gen.rs"]
mod sort_gen;
#[path = "stream_gen.rs"]
mod stream_gen;
#[path = "zset_gen.rs"]
mod zset_gen;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// Absolute future times start here (unix seconds, 2096-10-02).
pub const ABSOLUTE_EPOCH_S: i64 = 3_999_999_000;

/// How the runner compares a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Byte-identical RESP.
    Exact,
    /// `TTL`/`PTTL`: -2, -1, or any positive number.
    TtlClass,
    /// `EXPIRETIME`/`PEXPIRETIME`: exact when absolute, else a class.
    ExpireTime { ms: bool },
    /// `KEYS`: compared as a sorted list.
    Sorted,
    /// `SCAN 0 ...`: iterated to completion, the sorted unions compared.
    Scan,
    /// `RANDOMKEY`: null vs a key.
    RandomKey,
    /// `MEMORY USAGE`: null for a missing key, a positive size otherwise
    /// (the sizes are each server's own layout); errors exactly.
    MemoryUsage,
    /// `ZSCAN key 0 ...`: iterated to completion, the sorted sets of
    /// (member, score) pairs compared.
    ZScan,
    /// `ZRANDMEMBER` (and other random picks): only the reply's shape
    /// (null, bulk, or an array of the same length) is compared.
    RandomMembers,
    /// `HGETALL`: the (field, value) pairs compared as a sorted list (a
    /// hashtable's order is its own on each server).
    SortedPairs,
    /// `HSCAN`/`SSCAN k 0 ... COUNT 1000` over a small collection: both
    /// finish in one call (cursor 0) and the elements compare sorted
    /// (`pairs`: as (field, value) pairs).
    ScanOnce { pairs: bool },
    /// `SRANDMEMBER`/`HRANDFIELD`: random picks of the same shape (type and
    /// length); the digest after the case proves the data equal.
    RandomShape,
}

#[derive(Debug, Clone)]
pub struct Command {
    pub args: Vec<Vec<u8>>,
    pub check: Check,
    /// Which of the session's two connections sends it.
    pub conn: usize,
}

impl Command {
    fn new(args: Vec<Vec<u8>>, check: Check) -> Self {
        Command {
            args,
            check,
            conn: 0,
        }
    }

    /// The command in `redis-cli` form, bytes escaped, long arguments cut.
    pub fn display(&self) -> String {
        let prefix = if self.conn == 1 { "[conn 1] " } else { "" };
        prefix.to_string()
            + &self
                .args
                .iter()
                .map(|a| {
                    if a.len() > 120 {
                        format!("{}...({} bytes)", quote(&a[..60]), a.len())
                    } else {
                        quote(a)
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
    }
}

/// Quotes bytes the way `redis-cli` prints them.
pub fn quote(a: &[u8]) -> String {
    let mut s = String::from("\"");
    for &c in a {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('"');
    s
}

/// Databases the generator uses; a few commands also get invalid ones.
const DBS: &[&str] = &["0", "1", "2"];

const KEYS: &[&[u8]] = &[
    b"k0",
    b"k1",
    b"k2",
    b"k3",
    b"k\x00\r\n\xff",
    b"long-key-name-that-is-more-than-forty-four-bytes-long",
    // Glob metacharacters in a key name, for KEYS/SCAN MATCH.
    b"k[1]*?\\",
];

/// A key that only holds float-like values (only [`Generator::float_value`]
/// writes it; it is never a destination of RENAME, COPY, MSET, APPEND or
/// SETRANGE), so `INCRBYFLOAT` sums accumulate on it.
pub const FLOAT_KEY: &[u8] = b"f";

/// Values for [`FLOAT_KEY`]: floats, integers, and a few texts that are
/// not floats at all.
const FLOAT_VALUES: &[&str] = &[
    "0", "1", "-1", "7", "42", "-5", "100", "9999", "007", "-0", "+3", " 3", "3 ", "0x10", "",
    "abc", "1.5", "-0.25", "10.5", "3.0", "0.5", "2.75", "-7.125", "1e3", "5.", ".5", "inf",
    "-inf", "1.50", "100.25",
];

const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "7",
    "42",
    "-5",
    "100",
    "9999",
    "10000",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775806",
    "-9223372036854775807",
];

/// Strings that look almost like integers (non-canonical, out of range).
const NOT_INTS: &[&str] = &[
    "9223372036854775808",
    "-9223372036854775809",
    "007",
    "-0",
    "+3",
    " 3",
    "3 ",
    "0x10",
    "12345678901234567890123",
    "",
    "abc",
];

/// Dyadic decimals: exact in `f64` and in `long double`.
const FLOATS: &[&str] = &[
    "1.5", "-0.25", "10.5", "3.0", "0.5", "2.75", "-7.125", "1e3", "5.", ".5", "inf", "-inf",
    "1.50", "100.25",
];

const FLOAT_INCRS: &[&str] = &[
    "1.5",
    "-0.25",
    "10",
    "0.5",
    "-3",
    "2.75",
    "+2.5",
    "1e2",
    "-1.5",
    "0",
    "0x10",
    "-0",
    "0x1p-2",
    "0X1.8P1",
    "0.1",
    "-1.1",
    "3.14159",
    "1e-5",
    "1e400",
    "-1e400",
    "1e-400",
    "5e-324",
    "123456789.123456789",
    "1e19",
    "-1e20",
    "0x1p99999",
    "1e99999",
    "0e5",
    "-0x0p3",
];

/// Increments that fail whatever the key holds: invalid ones, and
/// infinities (any finite value plus `inf` overflows).
const FLOAT_INCRS_ANY_KEY: &[&str] = &[
    "abc", "", "1.5x", "nan", " 1", "1 ", "0x", "inf", "-inf", "infinity", "1e",
];

const INT_ARGS: &[&str] = &[
    "1",
    "-1",
    "5",
    "-100",
    "0",
    "9223372036854775807",
    "-9223372036854775808",
    "abc",
    "1.5",
    "",
    "+1",
    "007",
    "99999999999999999999",
];

const RANGE_ARGS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "-2",
    "-5",
    "5",
    "10",
    "100",
    "-100",
    "abc",
    "9223372036854775807",
    "-9223372036854775808",
];

const PATTERNS: &[&[u8]] = &[
    b"*",
    b"k*",
    b"k[0-2]",
    b"?1",
    b"*\xff*",
    b"k\\*",
    b"[^k]*",
    b"[a-",
    b"long*",
    b"*2",
    b"",
    b"k[!1]",
    b"K*",
    b"\\k1",
    b"k[2-0]",
    b"k[",
    b"k[\\]]*",
    b"k\\[*",
    b"[]k]*",
    b"k[^]*",
    b"k?",
    b"?",
    b"*\\",
    b"k[1-]*",
    b"k[-1]*",
    b"**1",
    b"*[*",
    b"k\x00*",
    b"k[\x00-\x01]*",
    b"bulk:1*",
    b"bulk:?",
    b"bulk:[1-3]?[05]",
];

/// Option names, sent in any case like command names.
const OPTION_WORDS: &[&str] = &[
    "WITHSCORE",
    "NOVALUES",
    "MAXAGE",
    "NX",
    "XX",
    "GT",
    "LT",
    "GET",
    "KEEPTTL",
    "EX",
    "PX",
    "EXAT",
    "PXAT",
    "PERSIST",
    "DB",
    "REPLACE",
    "IDX",
    "LEN",
    "MINMATCHLEN",
    "WITHMATCHLEN",
    "MATCH",
    "COUNT",
    "TYPE",
    "ENCODING",
    "FREQ",
    "HELP",
    "DIGEST-VALUE",
    "ASYNC",
    "SYNC",
    "STRING",
    "LIST",
    "LEFT",
    "RIGHT",
    "BEFORE",
    "AFTER",
    "RANK",
    "MAXLEN",
];

pub struct Generator {
    rng: StdRng,
    /// Relative expiries not yet used in this sequence (seconds).
    relative_pool: Vec<i64>,
    /// Whether each connection is between MULTI and EXEC/DISCARD: inside,
    /// only commands whose replies compare exactly are generated (EXEC's
    /// array holds their replies).
    in_multi: [bool; 2],
    /// The geo generator's place and scale for this sequence (anchor
    /// index, spread in degrees), picked at its first command.
    geo_focus: Option<(usize, f64)>,
    /// Only the forms Redis 7.2/7.4 added (`newer_gen.rs`), for the run
    /// against Redis 7.4.
    newer: bool,
}

impl Generator {
    pub fn new(seed: u64) -> Self {
        let mut relative_pool: Vec<i64> = (0..2000).map(|j| 1000 + 97 * j).collect();
        let mut rng = StdRng::seed_from_u64(seed);
        relative_pool.shuffle(&mut rng);
        Generator {
            rng,
            relative_pool,
            in_multi: [false; 2],
            geo_focus: None,
            newer: false,
        }
    }

    /// A generator of the forms Redis 7.2/7.4 added (`newer_gen.rs`).
    pub fn newer(seed: u64) -> Self {
        Generator {
            newer: true,
            ..Generator::new(seed)
        }
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        *xs.choose(&mut self.rng).unwrap()
    }

    fn key(&mut self) -> Vec<u8> {
        // The first keys are the likeliest, so commands meet on them.
        let i = if self.chance(0.7) {
            self.rng.gen_range(0..3)
        } else {
            self.rng.gen_range(0..KEYS.len())
        };
        KEYS[i].to_vec()
    }

    /// A key a command reads, moves away or expires: sometimes the float key.
    fn source_key(&mut self) -> Vec<u8> {
        if self.chance(0.15) {
            FLOAT_KEY.to_vec()
        } else {
            self.key()
        }
    }

    /// A value for [`FLOAT_KEY`].
    fn float_value(&mut self) -> Vec<u8> {
        self.pick(FLOAT_VALUES).into()
    }

    fn keys(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = self.rng.gen_range(1..=max);
        (0..n).map(|_| self.key()).collect()
    }

    fn db(&mut self) -> Vec<u8> {
        if self.chance(0.08) {
            self.pick(&["16", "-1", "abc", "1.5", "100000000000"])
                .into()
        } else {
            self.pick(DBS).into()
        }
    }

    fn int_arg(&mut self) -> Vec<u8> {
        self.pick(INT_ARGS).into()
    }

    fn random_bytes(&mut self, len: usize, alphabet: &[u8]) -> Vec<u8> {
        (0..len).map(|_| self.pick(alphabet)).collect()
    }

    /// A value to store: integers, near-integers, floats, binary bytes,
    /// empty, short and long (> 44 bytes, Redis's `raw` limit) strings.
    pub fn value(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..12) {
            0 | 1 => self.pick(INTS).into(),
            2 => self.pick(NOT_INTS).into(),
            3 => self.pick(FLOATS).into(),
            4 => b"\x00\r\n\xff".to_vec(),
            5 => {
                let n = self.rng.gen_range(0..6);
                self.random_bytes(n, b"\x00\r\n\xffab")
            }
            6 => Vec::new(),
            7 => {
                let n = self.rng.gen_range(40..70);
                self.random_bytes(n, b"abcxyz")
            }
            8 | 9 => {
                // Short strings over a tiny alphabet give LCS something to find.
                let n = self.rng.gen_range(0..16);
                self.random_bytes(n, b"abc")
            }
            10 if self.chance(0.05) => {
                // Past the 64 KiB mark where ferrokv frees replaced values
                // off the loop.
                let n = self.rng.gen_range(65_000..70_000);
                self.random_bytes(n, b"ab\x00")
            }
            10 => self
                .pick(&["hello", "foo bar", "x", "ohmytext", "mynewtext"])
                .into(),
            _ => {
                let n = self.rng.gen_range(1..5);
                self.random_bytes(n, b"0123456789")
            }
        }
    }

    /// A relative expiry in seconds, unique in this sequence.
    fn relative_s(&mut self) -> i64 {
        self.relative_pool.pop().expect("relative expiry pool")
    }

    /// An absolute future time in seconds (after `ABSOLUTE_EPOCH_S`).
    fn absolute_s(&mut self) -> i64 {
        ABSOLUTE_EPOCH_S + 1000 * self.rng.gen_range(1..6)
    }

    /// An absolute future time in ms, not always a whole second.
    fn absolute_ms(&mut self) -> i64 {
        let s = self.absolute_s();
        s * 1000 + self.pick(&[0, 1, 499, 500, 501, 999])
    }

    /// An `EX|PX|EXAT|PXAT value` pair (future only), or an invalid one.
    ///
    /// Never a past time: `SET k v EXAT 1` stores a key that is already
    /// expired, and when it goes (the next access, or whenever Redis's
    /// active expiry cycle samples it) is timing, so `DBSIZE` and the
    /// digest would race. GETEX and EXPIRE with past times delete at once
    /// and are generated.
    fn set_expiry(&mut self, cmd: &str) -> Vec<Vec<u8>> {
        let unit = self.pick(&["EX", "PX", "EXAT", "PXAT", "ex", "pxat"]);
        let value = if self.chance(0.1) {
            self.pick(&["0", "-1", "abc", "1.5", "", "9223372036854775807"])
                .to_string()
        } else {
            match unit.to_ascii_uppercase().as_str() {
                "EX" => self.relative_s().to_string(),
                "PX" => (self.relative_s() * 1000).to_string(),
                "EXAT" => self.absolute_s().to_string(),
                _ => self.absolute_ms().to_string(),
            }
        };
        let _ = cmd;
        vec![unit.into(), value.into_bytes()]
    }

    fn case(&mut self, s: &str) -> Vec<u8> {
        // Command names and options in any case.
        match self.rng.gen_range(0..4) {
            0 => s.to_ascii_lowercase().into_bytes(),
            1 => s
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_lowercase()
                    } else {
                        c.to_ascii_uppercase()
                    }
                })
                .collect::<String>()
                .into_bytes(),
            _ => s.to_ascii_uppercase().into_bytes(),
        }
    }

    /// One command.
    pub fn command(&mut self) -> Command {
        let conn = usize::from(self.chance(0.2));
        let mut c = match self.transaction_command(conn) {
            Some(c) => c,
            None => loop {
                let c = self.command_inner();
                if !self.in_multi[conn] || c.check == Check::Exact {
                    break c;
                }
            },
        };
        c.conn = conn;
        // MULTI/EXEC/DISCARD keep their arity: the generator tracks
        // whether a connection is inside a transaction.
        // (And against Redis 7.4, XREAD's and XREADGROUP's: 7.4 words
        // the unbalanced-streams error as 7.0 does not; and SCAN's, which
        // is there only to refuse its NOVALUES.)
        // ZRANK and ZREVRANK take a fourth word since 7.2 (WITHSCORE):
        // where 7.0 counts one too many, ferrokv names the word.
        let keeps_arity = matches!(
            &c.args[0][..],
            b"MULTI" | b"EXEC" | b"DISCARD" | b"ZRANK" | b"ZREVRANK"
        ) || (self.newer
            && (c.args[0].starts_with(b"XREAD") || c.args[0] == b"SCAN"));
        let name = String::from_utf8_lossy(&c.args[0]).to_string();
        c.args[0] = self.case(&name);
        for i in 1..c.args.len() {
            let a = String::from_utf8_lossy(&c.args[i]).to_ascii_uppercase();
            if OPTION_WORDS.contains(&a.as_str()) {
                c.args[i] = self.case(&a);
            }
        }
        // Wrong arity now and then: one argument too few or too many.
        if !keeps_arity && self.chance(0.03) && c.check == Check::Exact {
            // Never a number: an extra `SET k v PX` + `7` would expire
            // during the test.
            if self.chance(0.5) && c.args.len() > 1 {
                c.args.pop();
            } else {
                c.args.push(b"extra-arg".to_vec());
            }
        }
        c
    }

    /// Now and then a transaction command: MULTI, EXEC, DISCARD, WATCH,
    /// UNWATCH, also where Redis refuses them (nested MULTI, EXEC without
    /// MULTI, WATCH inside MULTI).
    fn transaction_command(&mut self, conn: usize) -> Option<Command> {
        let b = |s: &str| s.as_bytes().to_vec();
        let p = if self.in_multi[conn] { 0.15 } else { 0.04 };
        if !self.chance(p) {
            return None;
        }
        let args = if self.in_multi[conn] {
            match self.rng.gen_range(0..10) {
                0..=5 => {
                    self.in_multi[conn] = false;
                    vec![b("EXEC")]
                }
                6..=7 => {
                    self.in_multi[conn] = false;
                    vec![b("DISCARD")]
                }
                8 => vec![b("MULTI")],
                _ => {
                    let mut a = vec![b("WATCH")];
                    a.extend(self.keys(2));
                    a
                }
            }
        } else {
            match self.rng.gen_range(0..10) {
                0..=4 => {
                    self.in_multi[conn] = true;
                    vec![b("MULTI")]
                }
                5..=7 => {
                    let mut a = vec![b("WATCH")];
                    a.extend(self.keys(3));
                    a
                }
                8 => vec![b("UNWATCH")],
                _ => vec![b(self.pick(&["EXEC", "DISCARD"]))],
            }
        };
        Some(Command::new(args, Check::Exact))
    }

    fn command_inner(&mut self) -> Command {
        use Check::*;
        if self.newer {
            return self.newer_command();
        }
        if scripts_enabled() && self.chance(0.12) {
            return self.script_command();
        }
        if self.chance(0.3) {
            return self.zset_command();
        }
        if self.chance(0.08) {
            return self.bitmap_command();
        }
        if self.chance(0.04) {
            return self.hll_command();
        }
        if self.chance(0.02) {
            return self.restore_command();
        }
        if self.chance(0.03) {
            return self.sort_command();
        }
        if self.chance(geo_gen::share()) {
            return self.geo_command();
        }
        if self.chance(stream_gen::share()) {
            return self.stream_command();
        }
        let b = |s: &str| s.as_bytes().to_vec();
        let k = self.key();
        // Commands that only read, delete, move away or expire their key
        // may meet the float key too.
        let src = self.source_key();
        if self.chance(0.25) {
            return self.list_command(k, src);
        }
        let choice = self.rng.gen_range(0..130);
        if choice >= 100 {
            return if choice < 115 {
                self.hash_command(k)
            } else {
                self.set_command_of_sets(k)
            };
        }
        let args: Vec<Vec<u8>> = match choice {
            0..=9 => return self.set_command(k),
            10..=13 => vec![b("GET"), src],
            14..=15 => {
                let mut a = vec![b("GETEX"), src];
                a.extend(self.getex_options());
                a
            }
            16 => vec![b("GETDEL"), src],
            17 => vec![b("GETSET"), k, self.value()],
            18 => vec![b("SETNX"), k, self.value()],
            19 => {
                let t = self.expire_arg_for_set_ex(false);
                vec![b("SETEX"), k, t, self.value()]
            }
            20 => {
                let t = self.expire_arg_for_set_ex(true);
                vec![b("PSETEX"), k, t, self.value()]
            }
            21..=22 => {
                let mut a = vec![b("MSET")];
                for key in self.keys(3) {
                    a.push(key);
                    a.push(self.value());
                }
                a
            }
            23 => {
                let mut a = vec![b("MSETNX")];
                for key in self.keys(3) {
                    a.push(key);
                    a.push(self.value());
                }
                a
            }
            24..=25 => {
                let mut a = vec![b("MGET")];
                a.extend(self.keys(4));
                a
            }
            26..=27 => vec![b("APPEND"), k, self.value()],
            28 => vec![b("STRLEN"), src],
            29..=30 => {
                let name = if self.chance(0.2) {
                    "SUBSTR"
                } else {
                    "GETRANGE"
                };
                vec![
                    b(name),
                    src,
                    self.pick(RANGE_ARGS).into(),
                    self.pick(RANGE_ARGS).into(),
                ]
            }
            31..=32 => {
                let off = if self.chance(0.1) {
                    // 2^29 + a byte exceeds proto-max-bulk-len: an error,
                    // never a 512 MB allocation.
                    self.pick(&["-1", "abc", "536870912", "9223372036854775807"])
                        .to_string()
                } else if self.chance(0.03) {
                    self.rng.gen_range(65_530..65_540).to_string()
                } else {
                    self.rng.gen_range(0..70).to_string()
                };
                vec![b("SETRANGE"), k, off.into_bytes(), self.value()]
            }
            33..=34 => vec![b("INCR"), src],
            35 => vec![b("DECR"), src],
            36 => vec![b("INCRBY"), k, self.int_arg()],
            37 => vec![b("DECRBY"), k, self.int_arg()],
            38..=39 => match self.rng.gen_range(0..5) {
                0 | 1 => vec![
                    b("INCRBYFLOAT"),
                    FLOAT_KEY.to_vec(),
                    self.pick(FLOAT_INCRS).into(),
                ],
                2 | 3 => vec![b("INCRBYFLOAT"), k, self.pick(FLOAT_INCRS).into()],
                _ => vec![b("INCRBYFLOAT"), k, self.pick(FLOAT_INCRS_ANY_KEY).into()],
            },
            40..=41 => self.lcs(),
            42..=43 => {
                let mut a = vec![b(self.pick(&["DEL", "UNLINK"]))];
                a.extend(self.keys(3));
                a
            }
            44..=45 => {
                let mut a = vec![b("EXISTS")];
                a.extend(self.keys(4));
                a
            }
            46 => vec![b("TYPE"), src],
            47..=48 => vec![b(self.pick(&["RENAME", "RENAMENX"])), src, self.key()],
            49..=50 => {
                let mut a = vec![b("COPY"), src, self.key()];
                let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
                if self.chance(0.5) {
                    opts.push(vec![b("DB"), self.db()]);
                }
                if self.chance(0.5) {
                    opts.push(vec![b("REPLACE")]);
                }
                if self.chance(0.1) {
                    opts.push(vec![b(self.pick(&["FOO", "DB", "REPLACE"]))]);
                }
                opts.shuffle(&mut self.rng);
                for o in opts {
                    a.extend(o);
                }
                a
            }
            51 => vec![b("MOVE"), src, self.db()],
            52..=53 => vec![b("SELECT"), self.db()],
            54 => vec![b("SWAPDB"), self.db(), self.db()],
            55 => match self.rng.gen_range(0..8) {
                // The protected actions, refused by both servers' defaults
                // (enable-protected-configs / enable-module-command no).
                0 => vec![
                    b("CONFIG"),
                    b("SET"),
                    b(self.pick(&["dir", "dbfilename"])),
                    b("/tmp"),
                ],
                1 => vec![
                    b("MODULE"),
                    b(self.pick(&["LOAD", "LOADEX", "UNLOAD"])),
                    b("/tmp/x.so"),
                ],
                2 => vec![b("MODULE"), b(self.pick(&["LIST", "HELP", "FOO"]))],
                _ => vec![b("DBSIZE")],
            },
            56 => {
                if self.chance(0.3) {
                    let mut a = vec![b("FLUSHDB")];
                    if self.chance(0.5) {
                        a.push(b(self.pick(&["ASYNC", "SYNC", "sync", "FOO"])));
                    }
                    a
                } else {
                    vec![b("DBSIZE")]
                }
            }
            57..=64 => return self.expire_command(src),
            65..=66 => return Command::new(vec![b(self.pick(&["TTL", "PTTL"])), src], TtlClass),
            67..=68 => {
                let ms = self.chance(0.5);
                let name = if ms { "PEXPIRETIME" } else { "EXPIRETIME" };
                return Command::new(vec![b(name), src], ExpireTime { ms });
            }
            69 => vec![b("PERSIST"), src],
            70..=72 => match self.rng.gen_range(0..20) {
                0 => vec![b("OBJECT"), b(self.pick(&["FOO", "encoding"])), src],
                1 => vec![b("OBJECT"), b("FREQ"), src],
                2 => vec![b("OBJECT"), b("HELP")],
                9 => return self.acl_command(src),
                4 => {
                    let mut args = vec![b("MEMORY"), b("USAGE"), src];
                    match self.rng.gen_range(0..4) {
                        0 => {}
                        1 => args.extend([b("SAMPLES"), b(self.pick(&["0", "1", "5", "-1", "x"]))]),
                        2 => args.push(b(self.pick(&["SAMPLES", "FOO"]))),
                        _ => args.extend([b("samples"), self.int_arg()]),
                    }
                    return Command::new(args, MemoryUsage);
                }
                // The digest of single keys, mid-sequence.
                // And now and then DEBUG POPULATE: a few keys of its own
                // names (existing ones left alone), or its errors.
                3 if self.chance(0.1) => vec![
                    b("DEBUG"),
                    b("POPULATE"),
                    b(self.pick(&["3", "0", "-1", "x"])),
                    b(self.pick(&["pop", "k"])),
                    b(self.pick(&["0", "2", "12", "-5"])),
                ],
                // DEBUG's test helpers that change no data: CHANGE-REPL-ID
                // (a new replication id) and PAUSE-CRON with values that
                // keep the cron running (`0`, and `x`, which atoi reads as
                // 0), with and without their argument (the arity errors).
                3 if self.chance(0.05) => {
                    let mut v = vec![b("DEBUG"), b(self.pick(&["CHANGE-REPL-ID", "pause-cron"]))];
                    if self.chance(0.7) {
                        v.push(b(self.pick(&["0", "x"])));
                    }
                    v
                }
                3 => vec![b("DEBUG"), b("DIGEST-VALUE"), src, self.source_key()],
                // Server and connection commands whose replies do not
                // depend on timing or on the connection's address: READONLY
                // and READWRITE outside cluster mode, LOLWUT's versions
                // without a drawing (5 and 6 draw at random), MEMORY HELP,
                // and the tracking introspection of a connection that does
                // not track (CLIENT TRACKING ON would change what the next
                // replies carry).
                5 => match self.rng.gen_range(0..3) {
                    0 => vec![b(self.pick(&[
                        "READONLY",
                        "READWRITE",
                        "readonly",
                        "ASKING",
                    ]))],
                    // The CLUSTER family outside cluster mode (both servers
                    // refuse it the same way; tests/cluster.rs runs it on).
                    1 => vec![
                        b("CLUSTER"),
                        b(self.pick(&["HELP", "INFO", "NODES", "MYID", "SLOTS", "SHARDS"])),
                    ],
                    _ => vec![
                        b("CLUSTER"),
                        b(self.pick(&["KEYSLOT", "COUNTKEYSINSLOT"])),
                        src,
                    ],
                },
                6 => {
                    let v = self.pick(&["1", "4", "7", "x", "-1", "4294967297"]);
                    vec![b("LOLWUT"), b("VERSION"), b(v)]
                }
                7 => vec![b("MEMORY"), b(self.pick(&["HELP", "help", "FOO"]))],
                8 => match self.rng.gen_range(0..4) {
                    0 => vec![b("CLIENT"), b("GETREDIR")],
                    1 => vec![b("CLIENT"), b("TRACKINGINFO")],
                    2 => vec![
                        b("CLIENT"),
                        b("CACHING"),
                        b(self.pick(&["YES", "no", "maybe"])),
                    ],
                    _ => vec![b("CLIENT"), b("TRACKING"), b(self.pick(&["OFF", "maybe"]))],
                },
                // Not OBJECT REFCOUNT: ferrokv does not model Redis's
                // shared integers exactly (a COPY of one is unshared).
                // Not OBJECT IDLETIME: it is a clock.
                _ => vec![b("OBJECT"), b("ENCODING"), src],
            },
            73 => return Command::new(vec![b("KEYS"), self.pick(PATTERNS).to_vec()], Sorted),
            74 => return self.scan(),
            75 => return Command::new(vec![b("RANDOMKEY")], RandomKey),
            76 => {
                let name = self.pick(&[
                    "FOOBAR",
                    "GETT",
                    "SETX",
                    "\x00",
                    "EXPIREX",
                    "",
                    "object|encoding",
                ]);
                let mut a = vec![b(name)];
                for _ in 0..self.rng.gen_range(0..3) {
                    a.push(self.value());
                }
                a
            }
            77 => {
                let mut a = vec![b("TOUCH")];
                a.extend(self.keys(3));
                a
            }
            78..=81 => vec![b("INCRBY"), k, self.pick(INTS).into()],
            82..=85 => vec![b("SET"), k, self.value()],
            86 => vec![b("SET"), FLOAT_KEY.to_vec(), self.float_value()],
            87 => vec![
                b("INCRBYFLOAT"),
                FLOAT_KEY.to_vec(),
                self.pick(FLOAT_INCRS).into(),
            ],
            88..=89 => vec![b("GET"), k],
            90..=92 => vec![b("APPEND"), k, self.pick(INTS).into()],
            93..=95 => vec![b("OBJECT"), b("ENCODING"), src],
            96 if self.chance(0.3) => {
                // Hundreds of keys at once, so KEYS, SCAN, DBSIZE, SWAPDB
                // and FLUSHDB also meet tables that had to grow.
                let mut a = vec![b("MSET")];
                let base = self.rng.gen_range(0..1000);
                for i in 0..self.rng.gen_range(100..400) {
                    a.push(format!("bulk:{}", base + i).into_bytes());
                    a.push(self.value());
                }
                a
            }
            _ => vec![b("DEL"), src],
        };
        Command::new(args, Exact)
    }

    /// ACL users (never `default`, so the session's connections stay
    /// logged in) and what they may run: SETUSER with rules valid and not,
    /// DRYRUN of commands on the session's keys, DELUSER, USERS, WHOAMI,
    /// CAT, HELP, LOG RESET, SAVE/LOAD (no aclfile). Not LIST/GETUSER: Redis spells a user's commands in its
    /// dictionary's order (tests/acl.rs compares them by what they allow).
    fn acl_command(&mut self, key: Vec<u8>) -> Command {
        use Check::*;
        let b = |s: &str| s.as_bytes().to_vec();
        let user = b(self.pick(&["u0", "u1", "u2", "nosuch"]));
        const RULES: &[&str] = &[
            "on",
            "off",
            "nopass",
            ">pw",
            "<pw",
            "resetpass",
            "~k*",
            "~*",
            "%R~k*",
            "%W~s*",
            "allkeys",
            "resetkeys",
            "+get",
            "-get",
            "+set",
            "+@all",
            "-@all",
            "+@read",
            "-@write",
            "+@string",
            "-@dangerous",
            "&c*",
            "&*",
            "resetchannels",
            "+select|0",
            "+config|get",
            "(+set ~x*)",
            "(+get",
            "clearselectors",
            "reset",
            "+nosuch",
            "+@nosuch",
            "#bad",
            "%X~k",
            "",
            "+client|id|x",
        ];
        let args = match self.rng.gen_range(0..8) {
            0..=2 => {
                let mut a = vec![b("ACL"), b("SETUSER"), user];
                for _ in 0..self.rng.gen_range(0..5) {
                    a.push(b(self.pick(RULES)));
                }
                a
            }
            3..=4 => {
                let mut a = vec![b("ACL"), b("DRYRUN"), user];
                match self.rng.gen_range(0..5) {
                    0 => a.extend([b("GET"), key]),
                    1 => a.extend([b("SET"), key, self.value()]),
                    2 => a.extend([b("PUBLISH"), b(self.pick(&["c1", "d1"])), b("m")]),
                    3 => a.extend([b("SELECT"), b(self.pick(&["0", "1"]))]),
                    _ => a.extend([b("CONFIG"), b(self.pick(&["GET", "SET"])), b("x")]),
                }
                a
            }
            5 => vec![b("ACL"), b("DELUSER"), user],
            // Without an aclfile SAVE and LOAD answer Redis's error; LOG
            // RESET and HELP are fixed replies.
            6 => match self.rng.gen_range(0..3) {
                0 => vec![b("ACL"), b(self.pick(&["USERS", "WHOAMI", "HELP"]))],
                1 => vec![b("ACL"), b(self.pick(&["SAVE", "LOAD"]))],
                _ => vec![b("ACL"), b("LOG"), b("RESET")],
            },
            _ => {
                // Categories that gained no command since 7.0 (`string`
                // has DELIFEQ, `hash` the HEXPIRE family: served, so listed).
                let cat = self.pick(&["bitmap", "list", "nosuch"]);
                return Command::new(vec![b("ACL"), b("CAT"), b(cat)], Sorted);
            }
        };
        Command::new(args, Exact)
    }

    /// A list element: mostly from a small vocabulary, so LREM, LPOS and
    /// LINSERT find their pivots; sometimes any value.
    fn list_value(&mut self) -> Vec<u8> {
        if self.chance(0.7) {
            self.pick(&["a", "b", "c", "1", "-1", "", "10000", "x\x00\r\n"])
                .into()
        } else {
            self.value()
        }
    }

    /// One list command (the non-blocking ones; their edge cases: missing
    /// keys, wrong types, bad and negative counts, empty results, lists
    /// that span many chunks).
    fn list_command(&mut self, k: Vec<u8>, src: Vec<u8>) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let end = |g: &mut Self| -> Vec<u8> {
            if g.chance(0.05) {
                b(g.pick(&["UP", "", "L"]))
            } else {
                b(g.pick(&["LEFT", "RIGHT"]))
            }
        };
        let count = |g: &mut Self| -> Vec<u8> {
            b(g.pick(&["0", "1", "2", "3", "10", "-1", "abc", "9223372036854775807"]))
        };
        let args = match self.rng.gen_range(0..24) {
            0..=3 => {
                let mut a = vec![b(self.pick(&["LPUSH", "RPUSH"])), k];
                for _ in 0..self.rng.gen_range(1..5) {
                    a.push(self.list_value());
                }
                a
            }
            4 => vec![b(self.pick(&["LPUSHX", "RPUSHX"])), k, self.list_value()],
            5..=7 => {
                let mut a = vec![b(self.pick(&["LPOP", "RPOP"])), src];
                if self.chance(0.5) {
                    a.push(count(self));
                }
                a
            }
            8 => vec![b("LLEN"), src],
            9..=10 => vec![
                b("LRANGE"),
                src,
                self.pick(RANGE_ARGS).into(),
                self.pick(RANGE_ARGS).into(),
            ],
            11 => vec![b("LINDEX"), src, self.pick(RANGE_ARGS).into()],
            12 => vec![
                b("LSET"),
                k,
                self.pick(RANGE_ARGS).into(),
                self.list_value(),
            ],
            13 => vec![
                b("LINSERT"),
                k,
                b(self.pick(&["BEFORE", "AFTER", "before", "MIDDLE"])),
                self.list_value(),
                self.list_value(),
            ],
            14 => vec![b("LREM"), k, count(self), self.list_value()],
            15 => vec![
                b("LTRIM"),
                k,
                self.pick(RANGE_ARGS).into(),
                self.pick(RANGE_ARGS).into(),
            ],
            16 => {
                let mut a = vec![b("LPOS"), src, self.list_value()];
                for _ in 0..self.rng.gen_range(0..3) {
                    a.push(b(self.pick(&["RANK", "COUNT", "MAXLEN", "FOO"])));
                    a.push(b(self.pick(&["1", "2", "-1", "-2", "0", "abc", "5"])));
                }
                a
            }
            17 => vec![b("LMOVE"), src, self.key(), end(self), end(self)],
            18 => vec![b("RPOPLPUSH"), src, self.key()],
            19 => {
                let n = self.rng.gen_range(1..4);
                let mut a = vec![b("LMPOP")];
                a.push(if self.chance(0.05) {
                    b(self.pick(&["0", "-1", "abc", "5"]))
                } else {
                    n.to_string().into_bytes()
                });
                for _ in 0..n {
                    a.push(self.key());
                }
                a.push(end(self));
                if self.chance(0.5) {
                    a.push(b("COUNT"));
                    a.push(count(self));
                }
                a
            }
            20 => vec![b("OBJECT"), b("ENCODING"), src],
            21..=22 => vec![b("TYPE"), src],
            _ => {
                // Hundreds of elements: lists that span several chunks.
                let mut a = vec![b(self.pick(&["LPUSH", "RPUSH"])), k];
                for i in 0..self.rng.gen_range(100..400) {
                    a.push(if i % 7 == 0 {
                        self.list_value()
                    } else {
                        format!("element-{i}").into_bytes()
                    });
                }
                a
            }
        };
        Command::new(args, Check::Exact)
    }

    fn expire_arg_for_set_ex(&mut self, ms: bool) -> Vec<u8> {
        if self.chance(0.15) {
            return self
                .pick(&["0", "-1", "abc", "", "9223372036854775807", "1.5"])
                .into();
        }
        let s = self.relative_s();
        if ms {
            (s * 1000).to_string().into_bytes()
        } else {
            s.to_string().into_bytes()
        }
    }

    /// SET with any combination of options, valid or not, in any order.
    fn set_command(&mut self, k: Vec<u8>) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
        let n = self.rng.gen_range(0..4);
        for _ in 0..n {
            let o = match self.rng.gen_range(0..12) {
                0 | 1 => vec![b("NX")],
                2 | 3 => vec![b("XX")],
                4 | 5 => vec![b("GET")],
                6 => vec![b("KEEPTTL")],
                7..=9 => self.set_expiry("set"),
                10 => vec![b(self.pick(&["PERSIST", "FOO", "EX", "PXAT", "nx"]))],
                _ => vec![b(self.pick(&["get", "keepttl", "xx"]))],
            };
            opts.push(o);
        }
        opts.shuffle(&mut self.rng);
        let mut a = vec![b("SET"), k, self.value()];
        for o in opts {
            a.extend(o);
        }
        Command::new(a, Check::Exact)
    }

    fn getex_options(&mut self) -> Vec<Vec<u8>> {
        let b = |s: &str| s.as_bytes().to_vec();
        let mut out = Vec::new();
        for _ in 0..self.rng.gen_range(0..3) {
            match self.rng.gen_range(0..7) {
                0 => out.push(b("PERSIST")),
                1..=3 => out.extend(self.set_expiry("getex")),
                4 => {
                    // Past absolute times delete the key (deterministic).
                    out.push(b(self.pick(&["EXAT", "PXAT"])));
                    out.push(b(self.pick(&["1", "1000000000"])));
                }
                5 => out.push(b(self.pick(&["KEEPTTL", "NX", "FOO"]))),
                _ => out.push(b("EX")),
            }
        }
        out
    }

    fn lcs(&mut self) -> Vec<Vec<u8>> {
        let b = |s: &str| s.as_bytes().to_vec();
        let mut a = vec![b("LCS"), self.source_key(), self.source_key()];
        let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
        if self.chance(0.4) {
            opts.push(vec![b("IDX")]);
        }
        if self.chance(0.3) {
            opts.push(vec![b("LEN")]);
        }
        if self.chance(0.3) {
            let v = self.pick(&["0", "1", "2", "3", "-1", "abc", "100"]);
            opts.push(vec![b("MINMATCHLEN"), b(v)]);
        }
        if self.chance(0.3) {
            opts.push(vec![b("WITHMATCHLEN")]);
        }
        if self.chance(0.05) {
            opts.push(vec![b(self.pick(&["FOO", "MINMATCHLEN"]))]);
        }
        opts.shuffle(&mut self.rng);
        for o in opts {
            a.extend(o);
        }
        a
    }

    fn expire_command(&mut self, k: Vec<u8>) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let name = self.pick(&["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]);
        let ms = name.starts_with('P');
        let absolute = name.ends_with("AT");
        let t: String = match self.rng.gen_range(0..10) {
            // In the past: the key is deleted at once.
            0 | 1 => {
                if absolute {
                    self.pick(&["0", "1", "1000000000", "-5"]).into()
                } else {
                    self.pick(&["0", "-1", "-100"]).into()
                }
            }
            2 => self
                .pick(&[
                    "abc",
                    "1.5",
                    "",
                    "9223372036854775807",
                    "-9223372036854775808",
                ])
                .into(),
            _ => match (absolute, ms) {
                (false, false) => self.relative_s().to_string(),
                (false, true) => (self.relative_s() * 1000).to_string(),
                (true, false) => self.absolute_s().to_string(),
                (true, true) => self.absolute_ms().to_string(),
            },
        };
        let mut a = vec![b(name), k, t.into_bytes()];
        let n = match self.rng.gen_range(0..10) {
            0..=4 => 0,
            5..=8 => 1,
            _ => 2,
        };
        for _ in 0..n {
            let f = self.pick(&["NX", "XX", "GT", "LT", "nx", "gt", "FOO"]);
            a.push(b(f));
        }
        Command::new(a, Check::Exact)
    }

    fn scan(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let mut a = vec![b("SCAN"), b("0")];
        if self.chance(0.05) {
            // Invalid cursors only: a valid non-zero one (`-1` is
            // 2^64-1 to Redis) starts mid-table, where the two servers'
            // different hash functions make different, correct replies.
            a[1] = b(self.pick(&["abc", " 1", "-", "1x", "18446744073709551616"]));
        }
        let mut opts: Vec<Vec<Vec<u8>>> = Vec::new();
        if self.chance(0.5) {
            opts.push(vec![b("MATCH"), self.pick(PATTERNS).to_vec()]);
        }
        if self.chance(0.5) {
            let c = self.pick(&["1", "2", "5", "100", "0", "-1", "abc"]);
            opts.push(vec![b("COUNT"), b(c)]);
        }
        if self.chance(0.3) {
            let t = self.pick(&["string", "STRING", "list", "hash", "foo"]);
            opts.push(vec![b("TYPE"), b(t)]);
        }
        if self.chance(0.05) {
            opts.push(vec![b(self.pick(&["FOO", "MATCH"]))]);
        }
        opts.shuffle(&mut self.rng);
        for o in opts {
            a.extend(o);
        }
        Command::new(a, Check::Scan)
    }

    /// A hash field: short texts and integers most of the time, sometimes
    /// one past `hash-max-listpack-value` (64 bytes) or binary.
    fn field(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0..=3 => self.pick(&["a", "b", "c", "d"]).into(),
            4..=5 => self.pick(&["1", "2", "-3", "007", "10"]).into(),
            6 => b"\x00\r\n\xff".to_vec(),
            7 => vec![b'F'; 65],
            8 => Vec::new(),
            _ => self.pick(&["field", "xyz", "A"]).into(),
        }
    }

    /// A set member: integers (intset), near-integers and texts.
    fn member(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0..=4 => self
                .pick(&["1", "2", "3", "-5", "100", "0", "9223372036854775807"])
                .into(),
            5 => self.pick(NOT_INTS).into(),
            6..=7 => self.pick(&["a", "b", "c"]).into(),
            8 => b"\x00\xff".to_vec(),
            _ => vec![b'm'; 70],
        }
    }

    fn hscan_or_sscan(&mut self, name: &str, k: Vec<u8>, pairs: bool) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let mut a = vec![b(name), k, b("0")];
        if self.chance(0.4) {
            a.push(b("MATCH"));
            a.push(
                self.pick(&[&b"*"[..], b"a*", b"[0-9]*", b"?", b"F*"])
                    .to_vec(),
            );
        }
        if self.chance(0.08) {
            // Errors: checked only when the key holds the right type.
            a.push(b("COUNT"));
            a.push(b(self.pick(&["0", "-1", "abc"])));
            return Command::new(a, Check::Exact);
        }
        a.push(b("COUNT"));
        a.push(b("1000"));
        Command::new(a, Check::ScanOnce { pairs })
    }

    /// A command of the hash family.
    fn hash_command(&mut self, k: Vec<u8>) -> Command {
        use Check::*;
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..24) {
            0..=4 => {
                let mut a = vec![b(self.pick(&["HSET", "HSET", "HMSET"])), k];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.field());
                    a.push(self.value());
                }
                a
            }
            5 if self.chance(0.3) => {
                // Past `hash-max-listpack-entries` (128).
                let mut a = vec![b("HSET"), k];
                for i in 0..self.rng.gen_range(100..200) {
                    a.push(format!("bulk{i}").into_bytes());
                    a.push(self.value());
                }
                a
            }
            5 | 6 => vec![b("HSETNX"), k, self.field(), self.value()],
            7 | 8 => vec![b("HGET"), k, self.field()],
            9 => {
                let mut a = vec![b("HMGET"), k];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.field());
                }
                a
            }
            10 | 11 => {
                let mut a = vec![b("HDEL"), k];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.field());
                }
                a
            }
            12 => vec![b("HEXISTS"), k, self.field()],
            13 => vec![b(self.pick(&["HLEN", "HLEN", "TYPE"])), k],
            14 => vec![b("HSTRLEN"), k, self.field()],
            15 => return Command::new(vec![b(self.pick(&["HKEYS", "HVALS"])), k], Sorted),
            16 => return Command::new(vec![b("HGETALL"), k], SortedPairs),
            17 => vec![b("HINCRBY"), k, self.field(), self.int_arg()],
            18 => vec![
                b("HINCRBYFLOAT"),
                k,
                self.field(),
                self.pick(FLOAT_INCRS).into(),
            ],
            19 => {
                let mut a = vec![b("HRANDFIELD"), k];
                if self.chance(0.8) {
                    a.push(b(self.pick(&[
                        "1",
                        "2",
                        "5",
                        "-1",
                        "-7",
                        "0",
                        "100",
                        "abc",
                        "-9223372036854775808",
                    ])));
                    if self.chance(0.5) {
                        a.push(b(self.pick(&["WITHVALUES", "WITHVALUES", "FOO"])));
                    }
                }
                return Command::new(a, RandomShape);
            }
            20 => return self.hscan_or_sscan("HSCAN", k, true),
            _ => vec![b("OBJECT"), b("ENCODING"), k],
        };
        Command::new(args, Exact)
    }

    /// A command of the set family.
    fn set_command_of_sets(&mut self, k: Vec<u8>) -> Command {
        use Check::*;
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..26) {
            0..=4 => {
                let mut a = vec![b("SADD"), k];
                for _ in 0..self.rng.gen_range(1..5) {
                    a.push(self.member());
                }
                a
            }
            5 if self.chance(0.2) => {
                // Past `set-max-intset-entries` (512).
                let mut a = vec![b("SADD"), k];
                let base = self.rng.gen_range(0..100);
                for i in 0..self.rng.gen_range(400..600) {
                    a.push((base + i).to_string().into_bytes());
                }
                a
            }
            5 | 6 => {
                let mut a = vec![b("SREM"), k];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.member());
                }
                a
            }
            7 => vec![b("SISMEMBER"), k, self.member()],
            8 => {
                let mut a = vec![b("SMISMEMBER"), k];
                for _ in 0..self.rng.gen_range(1..4) {
                    a.push(self.member());
                }
                a
            }
            9 => return Command::new(vec![b("SMEMBERS"), k], Sorted),
            10 => vec![b("SCARD"), k],
            11 => {
                // Only the deterministic forms: every member, none, errors.
                let count = self.pick(&["1000", "1000", "0", "-1", "abc"]);
                return Command::new(vec![b("SPOP"), k, b(count)], Sorted);
            }
            12 | 13 => {
                let mut a = vec![b("SRANDMEMBER"), k];
                if self.chance(0.8) {
                    a.push(b(self.pick(&[
                        "1",
                        "2",
                        "5",
                        "-1",
                        "-6",
                        "0",
                        "100",
                        "abc",
                        "-9223372036854775808",
                    ])));
                }
                return Command::new(a, RandomShape);
            }
            14 | 15 => vec![b("SMOVE"), k, self.key(), self.member()],
            16..=18 => {
                let name = self.pick(&["SINTER", "SUNION", "SDIFF"]);
                let mut a = vec![b(name), k];
                a.extend(self.keys(3));
                return Command::new(a, Sorted);
            }
            19..=21 => {
                let name = self.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]);
                let mut a = vec![b(name), k];
                a.extend(self.keys(3));
                a
            }
            22 => {
                let keys = self.keys(3);
                let numkeys = if self.chance(0.1) {
                    self.pick(&["0", "9", "abc"]).to_string()
                } else {
                    keys.len().to_string()
                };
                let mut a = vec![b("SINTERCARD"), numkeys.into_bytes()];
                a.extend(keys);
                if self.chance(0.4) {
                    a.push(b("LIMIT"));
                    a.push(b(self.pick(&["0", "1", "2", "-1", "x"])));
                }
                a
            }
            23 => return self.hscan_or_sscan("SSCAN", k, false),
            _ => vec![b("OBJECT"), b("ENCODING"), k],
        };
        Command::new(args, Exact)
    }
}
