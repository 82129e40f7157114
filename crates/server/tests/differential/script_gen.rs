//! The scripting part of the generator: EVAL, EVALSHA, EVAL_RO,
//! EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH/KILL/DEBUG NO/HELP, FUNCTION
//! LOAD/DELETE/FLUSH/RESTORE (of a payload redis-server made)/LIST/STATS/
//! KILL/HELP and FCALL/FCALL_RO, with scripts that call commands of every family
//! (strings, generic, hashes, lists, sets, sorted sets, SELECT) through
//! `redis.call` and `redis.pcall` on the generator's keys and values, and
//! return every kind of Lua value: numbers (truncated), strings, booleans,
//! nil, arrays (cut at the first nil), status and error tables, the RESP3
//! tables (`double`, `map`, `set`, `big_number`, `verbatim_string`), the
//! replies of `redis.error_reply`/`status_reply`, raised errors and
//! scripts that do not compile. Some scripts switch to `redis.setresp(3)`,
//! so RESP3 replies of the commands are converted to Lua and back, and the
//! connection the script's caller speaks (RESP2 or RESP3) decides the
//! final encoding.
//!
//! Every script is deterministic: it uses no time, no `math.random`, no
//! commands whose reply order is a hash table's (HGETALL, HKEYS, SMEMBERS
//! unless sorted in Lua, KEYS, SCAN, RANDOMKEY, SPOP, SRANDMEMBER), no
//! `tostring` of a table (an address), and its keys come from the
//! generator's fixed set. The runner flushes the script cache and the
//! function libraries before each sequence, so whether an EVALSHA finds
//! its script depends on the sequence alone. FUNCTION LIST always names
//! `libr` (`LIBRARYNAME libr`, `libr*`, or one that matches nothing), a
//! library of one function: Redis lists libraries, and a library's
//! functions, in hash-table order. FUNCTION DUMP is not generated for the
//! same reason (its payload follows that order).

use super::{Check, Command, Generator};
use rand::Rng;

/// What a template's argument is drawn from.
#[derive(Clone, Copy)]
enum Arg {
    /// [`Generator::value`].
    Value,
    /// An integer-like argument (valid or not).
    Int,
    /// A list index.
    Range,
    /// A hash field.
    Field,
    /// A set member.
    Member,
    /// A sorted-set score.
    Score,
    /// A database number (sometimes invalid).
    Db,
    /// The name of a one-key command.
    OneKeyCommand,
    /// A number for `tonumber` (texts Lua reads and does not read).
    Number,
}

/// Fixed scripts: each with its key count and argument kinds. Their SHA-1s
/// are what EVALSHA, EVALSHA_RO and SCRIPT EXISTS ask for, so the cache
/// meets both hits and misses.
const TEMPLATES: &[(&str, usize, &[Arg])] = &[
    ("return redis.call('get', KEYS[1])", 1, &[]),
    ("return redis.call('set', KEYS[1], ARGV[1])", 1, &[Arg::Value]),
    ("return redis.pcall('incrby', KEYS[1], ARGV[1])", 1, &[Arg::Int]),
    (
        "redis.setresp(3); return redis.pcall('zrange', KEYS[1], 0, -1, 'withscores')",
        1,
        &[],
    ),
    (
        "local t = redis.pcall('smembers', KEYS[1]); if t.err then return t end; table.sort(t); return t",
        1,
        &[],
    ),
    (
        "return {redis.pcall('type', KEYS[1]), redis.pcall('exists', KEYS[1], KEYS[2])}",
        2,
        &[],
    ),
    (
        "return redis.pcall('lrange', KEYS[1], ARGV[1], ARGV[2])",
        1,
        &[Arg::Range, Arg::Range],
    ),
    (
        "redis.setresp(3); return redis.pcall('hmget', KEYS[1], ARGV[1], ARGV[2])",
        1,
        &[Arg::Field, Arg::Field],
    ),
    ("return redis.call(ARGV[1], KEYS[1])", 1, &[Arg::OneKeyCommand]),
    ("return {ok=ARGV[1]}", 0, &[Arg::Value]),
    ("return {err=ARGV[1]}", 0, &[Arg::Value]),
    ("return redis.error_reply(ARGV[1])", 0, &[Arg::Value]),
    ("return redis.status_reply(ARGV[1])", 0, &[Arg::Value]),
    ("return tonumber(ARGV[1])", 0, &[Arg::Number]),
    ("return {double=tonumber(ARGV[1])}", 0, &[Arg::Number]),
    (
        "redis.call('select', ARGV[1]); return redis.call('get', KEYS[1])",
        1,
        &[Arg::Db],
    ),
    // Not the error tables themselves: they carry a hidden field
    // (`ignore_error_stats_update`), and cjson/cmsgpack would list their
    // two fields in the order of Lua's hash table.
    (
        "local t = redis.pcall('lrange', KEYS[1], 0, -1); if t.err then return t end; return cjson.encode(t)",
        1,
        &[],
    ),
    (
        "local t = redis.pcall('zrange', KEYS[1], 0, -1, 'withscores'); if t.err then return t end; return cmsgpack.pack(t)",
        1,
        &[],
    ),
    (
        "return bit.band(tonumber(ARGV[1]) or 0, 255)",
        0,
        &[Arg::Number],
    ),
    (
        "redis.setresp(3); local s = redis.pcall('zscore', KEYS[1], ARGV[1]); return {s, type(s)}",
        1,
        &[Arg::Member],
    ),
    (
        "redis.setresp(3); return redis.pcall('sismember', KEYS[1], ARGV[1]) == 1",
        1,
        &[Arg::Member],
    ),
    (
        "return redis.pcall('zadd', KEYS[1], ARGV[1], ARGV[2])",
        1,
        &[Arg::Score, Arg::Member],
    ),
    ("#!lua flags=no-writes\nreturn redis.pcall('set', KEYS[1], 'x')", 1, &[]),
    ("#!lua\nreturn redis.call('incr', KEYS[1])", 1, &[]),
    ("return 1 +", 0, &[]),
];

/// Names for `redis.call(ARGV[1], KEYS[1])`: one-key commands of every
/// family whose replies are deterministic, and some that are refused.
const ONE_KEY_COMMANDS: &[&str] = &[
    "get",
    "GET",
    "strlen",
    "type",
    "exists",
    "del",
    "incr",
    "decr",
    "llen",
    "lpop",
    "rpop",
    "scard",
    "zcard",
    "hlen",
    "persist",
    "getdel",
    "object",
    "nosuch",
    "subscribe",
    "",
];

/// Texts for `tonumber`.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "1.5",
    "-2.5",
    " 3",
    "0x10",
    "1e3",
    "abc",
    "",
    "inf",
    "-inf",
    "nan",
    "1e300",
    "-0",
    "0.1",
    "9223372036854775807",
    "2.9",
    "1e20",
    "12345678901234567890",
];

const SCORES: &[&str] = &[
    "0", "1", "-1", "2.5", "0.1", "1e20", "inf", "-inf", "abc", "10",
];

/// Keys of sorted sets in scripts (never the lex-only key of zset_gen).
const ZKEYS: &[&[u8]] = &[b"z0", b"z1", b"z2"];

/// Function libraries, loaded (and replaced, deleted) by the sequence.
const LIBRARIES: &[&str] = &[
    "#!lua name=liba\n\
     redis.register_function('fa_get', function(keys, args) return redis.call('get', keys[1]) end)\n\
     redis.register_function{function_name='fa_ro', callback=function(keys, args) return redis.pcall('get', keys[1]) end, flags={'no-writes'}}\n\
     redis.register_function('fa_set', function(keys, args) return redis.call('set', keys[1], args[1]) end)\n\
     redis.register_function('fa_incr', function(keys, args) return redis.pcall('incrby', keys[1], args[1]) end)",
    "#!lua name=libb\n\
     redis.register_function('fb_resp3', function(keys, args) redis.setresp(3); return {redis.call('exists', keys[1]) == 1, redis.pcall('zscore', keys[1], args[1]), redis.pcall('hget', keys[1], args[1])} end)\n\
     redis.register_function('fb_err', function(keys, args) return redis.call('lpush', keys[1], args[1]) end)\n\
     redis.register_function{function_name='fb_nw', callback=function(keys, args) return redis.call('set', keys[1], args[1]) end, flags={'no-writes'}}",
    // libb again, other functions: only LOAD REPLACE takes it.
    "#!lua name=libb\n\
     redis.register_function('fb_v2', function(keys, args) return {keys[1], args[1], #keys, #args} end)",
    // A function name liba already has.
    "#!lua name=libc\n\
     redis.register_function('fa_get', function(keys, args) return 'libc' end)",
    // Broken libraries.
    "#!lua name=libd\nreturn 1",
    "#!lua name=libd\nredis.call('ping')",
    "#!lua\nredis.register_function('x', function() return 1 end)",
];

const LIBRARY_NAMES: &[&str] = &["liba", "libb", "libc", "libd", "nosuch"];

const FUNCTIONS: &[&str] = &[
    "fa_get", "fa_ro", "fa_set", "fa_incr", "fb_resp3", "fb_err", "fb_nw", "fb_v2", "fr_get",
    "nosuch",
];

/// `FUNCTION DUMP` of redis-server 7.0.15 holding one library, `libr`:
/// `redis.register_function{function_name='fr_get', callback=function(keys,
/// args) return redis.call('get', keys[1]) end, flags={'no-writes'},
/// description='reads'}` (its code LZF-compressed, as Redis writes it).
const REDIS_DUMP_LIBR: &[u8] = b"\xf5\xc3\x40\x9a\x40\xae\x1f\x23\x21\x6c\x75\x61\x20\x6e\x61\x6d\x65\x3d\x6c\x69\x62\x72\x0a\x72\x65\x64\x69\x73\x2e\x72\x65\x67\x69\x73\x74\x65\x72\x5f\x66\x07\x75\x6e\x63\x74\x69\x6f\x6e\x7b\xc0\x08\x00\x5f\x60\x2a\x12\x27\x66\x72\x5f\x67\x65\x74\x27\x2c\x20\x63\x61\x6c\x6c\x62\x61\x63\x6b\x3d\xc0\x20\x12\x28\x6b\x65\x79\x73\x2c\x20\x61\x72\x67\x73\x29\x20\x72\x65\x74\x75\x72\x6e\x20\x06\x40\x54\x40\x2a\x01\x28\x27\x80\x36\x40\x24\x1f\x5b\x31\x5d\x29\x20\x65\x6e\x64\x2c\x20\x66\x6c\x61\x67\x73\x3d\x7b\x27\x6e\x6f\x2d\x77\x72\x69\x74\x65\x73\x27\x7d\x2c\x20\x64\x05\x65\x73\x63\x72\x69\x70\x40\x7d\x05\x3d\x27\x72\x65\x61\x64\x20\x15\x0a\x00\x12\x44\x3b\xb6\x4b\xbb\x24\x40";

/// Whether the family is generated: yes unless `FERROKV_DIFF_SCRIPTS=0`
/// (for a server without scripting; the runner then also skips the
/// SCRIPT FLUSH / FUNCTION FLUSH before each sequence).
pub fn scripts_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("FERROKV_DIFF_SCRIPTS").as_deref() != Ok("0"))
}

pub use crate::common::sha1_hex;

/// A script being composed: the keys and arguments its text refers to.
struct Script {
    keys: Vec<Vec<u8>>,
    argv: Vec<Vec<u8>>,
}

impl Script {
    fn key(&mut self, k: Vec<u8>) -> String {
        self.keys.push(k);
        format!("KEYS[{}]", self.keys.len())
    }

    fn arg(&mut self, a: Vec<u8>) -> String {
        self.argv.push(a);
        format!("ARGV[{}]", self.argv.len())
    }
}

impl Generator {
    /// One scripting command.
    pub(super) fn script_command(&mut self) -> Command {
        let b = |s: &str| s.as_bytes().to_vec();
        let args: Vec<Vec<u8>> = match self.rng.gen_range(0..40) {
            0..=9 => {
                let (src, keys, argv) = self.composite_script();
                let name = if self.chance(0.1) { "EVAL_RO" } else { "EVAL" };
                self.eval_args(name, src, keys, argv)
            }
            10..=15 => {
                let (src, keys, argv) = self.template();
                let name = if self.chance(0.1) { "EVAL_RO" } else { "EVAL" };
                self.eval_args(name, src, keys, argv)
            }
            16..=19 => {
                let (src, keys, argv) = self.template();
                let sha = sha1_hex(&src);
                let sha = if self.chance(0.2) {
                    sha.to_uppercase()
                } else {
                    sha
                };
                let name = if self.chance(0.15) {
                    "EVALSHA_RO"
                } else {
                    "EVALSHA"
                };
                self.eval_args(name, sha.into_bytes(), keys, argv)
            }
            20 => {
                let (src, _, _) = self.template();
                vec![b("SCRIPT"), b("LOAD"), src]
            }
            21 => {
                let mut a = vec![b("SCRIPT"), b("EXISTS")];
                for _ in 0..self.rng.gen_range(1..4) {
                    let (src, _, _) = self.template();
                    a.push(sha1_hex(&src).into_bytes());
                }
                a
            }
            22 if self.chance(0.3) => vec![b("SCRIPT"), b("FLUSH")],
            22 => vec![b("SCRIPT"), b("KILL")],
            23..=29 => {
                let mut a = vec![b("FUNCTION"), b("LOAD")];
                // Mostly the two good libraries, replacing what is there,
                // so that FCALL finds functions.
                if self.chance(0.6) {
                    a.push(b("REPLACE"));
                }
                let lib = if self.chance(0.7) {
                    LIBRARIES[self.rng.gen_range(0..2)]
                } else {
                    self.pick(LIBRARIES)
                };
                a.push(b(lib));
                a
            }
            30 => match self.rng.gen_range(0..14) {
                0 => vec![b("FUNCTION"), b("DELETE"), b(self.pick(LIBRARY_NAMES))],
                1 if self.chance(0.3) => vec![b("FUNCTION"), b("FLUSH")],
                2 | 3 => {
                    // Redis's own payload, and one that is not.
                    let payload = if self.chance(0.8) {
                        REDIS_DUMP_LIBR.to_vec()
                    } else {
                        REDIS_DUMP_LIBR[..REDIS_DUMP_LIBR.len() - 1].to_vec()
                    };
                    let mut a = vec![b("FUNCTION"), b("RESTORE"), payload];
                    if self.chance(0.7) {
                        a.push(b(
                            self.pick(&["FLUSH", "APPEND", "REPLACE", "replace", "BOGUS"])
                        ));
                    }
                    a
                }
                // `libr` only (see the module docs).
                4 | 5 => {
                    let mut a = vec![b("FUNCTION"), b("LIST")];
                    a.push(b("LIBRARYNAME"));
                    a.push(b(self.pick(&["libr", "libr*", "nosuch"])));
                    if self.chance(0.5) {
                        a.push(b("WITHCODE"));
                    }
                    a
                }
                6 => vec![b("FUNCTION"), b("KILL")],
                7 => vec![b("FUNCTION"), b("HELP")],
                8 => vec![b("SCRIPT"), b("HELP")],
                9 => vec![b("SCRIPT"), b("DEBUG"), b("NO")],
                _ => vec![b("FUNCTION"), b("STATS")],
            },
            _ => {
                let name = if self.chance(0.2) {
                    "FCALL_RO"
                } else {
                    "FCALL"
                };
                let function = if self.chance(0.7) {
                    FUNCTIONS[self.rng.gen_range(0..5)]
                } else {
                    self.pick(FUNCTIONS)
                };
                let mut a = vec![b(name), b(function)];
                let nkeys = self.pick(&[0, 1, 1, 1, 2]);
                a.push(nkeys.to_string().into_bytes());
                for _ in 0..nkeys {
                    a.push(self.script_key());
                }
                for _ in 0..self.rng.gen_range(0..3) {
                    let kind = if self.chance(0.5) {
                        Arg::Int
                    } else {
                        Arg::Member
                    };
                    a.push(self.arg_of(kind));
                }
                a
            }
        };
        Command::new(args, Check::Exact)
    }

    /// `NAME script-or-sha numkeys keys... args...`; now and then a bad
    /// key count.
    fn eval_args(
        &mut self,
        name: &str,
        script: Vec<u8>,
        keys: Vec<Vec<u8>>,
        argv: Vec<Vec<u8>>,
    ) -> Vec<Vec<u8>> {
        let numkeys = if self.chance(0.03) {
            self.pick(&["-1", "abc", "100"]).to_string()
        } else {
            keys.len().to_string()
        };
        let mut a = vec![name.as_bytes().to_vec(), script, numkeys.into_bytes()];
        a.extend(keys);
        a.extend(argv);
        a
    }

    fn script_key(&mut self) -> Vec<u8> {
        if self.chance(0.25) {
            self.pick(ZKEYS).to_vec()
        } else {
            self.key()
        }
    }

    fn arg_of(&mut self, kind: Arg) -> Vec<u8> {
        match kind {
            Arg::Value => self.value(),
            Arg::Int => self.int_arg(),
            Arg::Range => self.pick(&["0", "1", "-1", "-2", "2", "10", "abc"]).into(),
            Arg::Field => self.field(),
            Arg::Member => self.member(),
            Arg::Score => self.pick(SCORES).into(),
            Arg::Db => self.db(),
            Arg::OneKeyCommand => self.pick(ONE_KEY_COMMANDS).into(),
            Arg::Number => self.pick(NUMBERS).into(),
        }
    }

    /// A fixed script with generated keys and arguments.
    fn template(&mut self) -> (Vec<u8>, Vec<Vec<u8>>, Vec<Vec<u8>>) {
        // The first ones more often, so EVALSHA finds them cached.
        let i = if self.chance(0.6) {
            self.rng.gen_range(0..8)
        } else {
            self.rng.gen_range(0..TEMPLATES.len())
        };
        let (src, nkeys, kinds) = TEMPLATES[i];
        let keys = (0..nkeys).map(|_| self.script_key()).collect();
        let argv = kinds.iter().map(|k| self.arg_of(*k)).collect();
        (src.as_bytes().to_vec(), keys, argv)
    }

    /// A script of one to four steps, each a `redis.call` or `redis.pcall`
    /// of a command of some family, whose results it collects in `r`, and
    /// a final `return` of some Lua type.
    fn composite_script(&mut self) -> (Vec<u8>, Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut s = Script {
            keys: Vec::new(),
            argv: Vec::new(),
        };
        let mut src = String::new();
        let resp3 = self.chance(0.3);
        if resp3 {
            src += "redis.setresp(3)\n";
        }
        src += "local r = {}\n";
        for _ in 0..self.rng.gen_range(1..5) {
            let call = self.step(&mut s, resp3);
            // Mostly pcall: a call that raises ends the script with an error.
            let f = if self.chance(0.9) { "pcall" } else { "call" };
            src += &format!("r[#r+1] = redis.{f}({call})\n");
        }
        src += &self.return_form(&mut s);
        (src.into_bytes(), s.keys, s.argv)
    }

    /// The arguments of one `redis.call`, as Lua text.
    fn step(&mut self, s: &mut Script, resp3: bool) -> String {
        let q = |name: &str| format!("'{name}'");
        let k = self.script_key();
        let key = s.key(k);
        let mut parts: Vec<String> = match self.rng.gen_range(0..44) {
            // Strings.
            0..=2 => {
                let v = self.value();
                vec![q("set"), key, s.arg(v)]
            }
            3..=4 => vec![q("get"), key],
            5 => vec![q("incr"), key],
            6 => {
                let v = self.int_arg();
                vec![q("incrby"), key, s.arg(v)]
            }
            7 => {
                let v = self.value();
                vec![q("append"), key, s.arg(v)]
            }
            8 => vec![q("strlen"), key],
            9 => {
                let other = self.script_key();
                vec![q("mget"), key, s.key(other)]
            }
            10 => {
                let v = self.pick(&["1.5", "0.1", "-2", "abc", "1e3"]);
                vec![q("incrbyfloat"), key, s.arg(v.into())]
            }
            // Lua numbers as arguments: Redis formats them with %.17g.
            11 => {
                let n = self.pick(&[
                    "5", "-3", "0.1", "2.5", "1e20", "1/3", "2^53", "-0", "-1e-300",
                ]);
                vec![q("set"), key, n.to_string()]
            }
            // Generic.
            12 => vec![q("del"), key],
            13 => {
                let other = self.script_key();
                vec![q("exists"), key, s.key(other)]
            }
            14 => vec![q("type"), key],
            15 => {
                let t = self.relative_s().to_string();
                vec![q("expire"), key, s.arg(t.into_bytes())]
            }
            16 => vec![q("persist"), key],
            17 => {
                let other = self.script_key();
                vec![q(self.pick(&["rename", "renamenx"])), key, s.key(other)]
            }
            // Hashes.
            18..=19 => {
                let f = self.field();
                let v = self.value();
                vec![q("hset"), key, s.arg(f), s.arg(v)]
            }
            20 => {
                let f = self.field();
                vec![q("hget"), key, s.arg(f)]
            }
            21 => {
                let f = self.field();
                let v = self.int_arg();
                vec![q("hincrby"), key, s.arg(f), s.arg(v)]
            }
            22 => vec![q("hlen"), key],
            23 => {
                let f = self.field();
                vec![q("hdel"), key, s.arg(f)]
            }
            // Lists.
            24..=25 => {
                let v = self.list_value();
                vec![q(self.pick(&["lpush", "rpush"])), key, s.arg(v)]
            }
            26 => vec![q(self.pick(&["lpop", "rpop"])), key],
            27 => vec![q("lrange"), key, "0".into(), "-1".into()],
            28 => vec![q("llen"), key],
            29 => vec![q("lindex"), key, self.pick(&["0", "-1", "5"]).into()],
            // Sets.
            30..=31 => {
                let m = self.member();
                vec![q("sadd"), key, s.arg(m)]
            }
            32 => {
                let m = self.member();
                vec![q(self.pick(&["srem", "sismember"])), key, s.arg(m)]
            }
            33 => vec![q("scard"), key],
            // Sorted sets.
            34..=35 => {
                let sc = self.pick(SCORES);
                let m = self.member();
                vec![q("zadd"), key, s.arg(sc.into()), s.arg(m)]
            }
            36 => {
                let m = self.member();
                vec![q("zscore"), key, s.arg(m)]
            }
            37 => {
                let sc = self.pick(SCORES);
                let m = self.member();
                vec![q("zincrby"), key, s.arg(sc.into()), s.arg(m)]
            }
            38 => vec![q("zrange"), key, "0".into(), "-1".into(), q("withscores")],
            39 => {
                let m = self.member();
                vec![q(self.pick(&["zrank", "zrem"])), key, s.arg(m)]
            }
            // SELECT, only for the rest of this script.
            40 => {
                let db = self.db();
                vec![q("select"), s.arg(db)]
            }
            // Errors: unknown, refused, wrong arity, a bad argument type.
            41 => vec![q(self.pick(&["nosuch", "subscribe", "multi", "eval"])), key],
            42 => vec![q("get")],
            _ => vec![q("get"), self.pick(&["{}", "nil", "true"]).into()],
        };
        if resp3 && self.chance(0.1) {
            // A double reply, a Lua {double=n} under RESP3.
            let m = self.member();
            parts = vec![q("zincrby"), s.key(b"z0".to_vec()), "0".into(), s.arg(m)];
        }
        parts.join(", ")
    }

    /// The script's last line: a value of some Lua type built from `r`.
    fn return_form(&mut self, s: &mut Script) -> String {
        match self.rng.gen_range(0..22) {
            0..=5 => "return r".into(),
            6..=8 => "return r[#r]".into(),
            9 => "return #r".into(),
            10 => "return type(r[1])".into(),
            11 => "return {r[1], 3.7, -2.5, 'x', true, false, {1, {2}}}".into(),
            12 => "return r[1] == false".into(),
            13 => "return {ok='done'}".into(),
            14 => {
                let v = self.value();
                format!("return {{err={}}}", s.arg(v))
            }
            15 => format!(
                "return {{double={}}}",
                self.pick(&["3.5", "0.1", "-0", "1/0", "1e300", "2"])
            ),
            // One entry each: a longer map would come out in the order of
            // Lua's own hash table.
            16 => "return {map={a={2, 3}}}".into(),
            17 => "return {set={x=true}}".into(),
            18 => "return {big_number='12345678901234567890123'}".into(),
            19 => "return {verbatim_string={format='txt', string='verbatim'}}".into(),
            20 => {
                let v = self.value();
                format!("return redis.error_reply({})", s.arg(v))
            }
            _ => "error('generated failure')".into(),
        }
    }
}
