//! The command table and dispatch.
//!
//! Each family file (`string.rs`, `keys.rs`, `connection.rs`, `server.rs`,
//! `slowlog.rs`, `latency.rs`, `zset.rs`, `geo.rs`, ...)
//! declares its rows of the table — name, arity, flags, key positions, docs —
//! next to the handlers, with the command's syntax in a comment above each
//! handler. [`CommandTable`] joins the rows once at start-up; dispatch is one
//! case-insensitive hash lookup, an arity check and a call.
//!
//! Handlers split parsing and reply from the data work, and write their
//! replies straight into the connection's output buffer through [`Ctx`].

pub mod bitmap;
pub mod connection;
pub mod docs;
mod docs_table;
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hash_expire;
pub mod hyperloglog;
pub mod keys;
pub mod keyspecs;
mod keyspecs_table;
pub mod latency;
pub mod list;
pub mod lolwut;
pub mod long_double;
pub mod memory;
pub mod module;
pub mod multi;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod sort;
pub mod stream;
pub mod string;
pub mod zset;

use crate::net::client::Client;
use crate::server::Server;
use ferrokv_resp::Args;
use hashbrown::HashMap;

pub type Handler = fn(&mut Ctx, Args);

/// Command flags, as `COMMAND INFO` names them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const FAST: u32 = 1 << 10;
    pub const NO_AUTH: u32 = 1 << 11;
    pub const MAY_REPLICATE: u32 = 1 << 12;
    pub const NO_MULTI: u32 = 1 << 13;
    pub const ALLOW_BUSY: u32 = 1 << 14;
    /// Never in the slow log (EXEC: its commands are logged one by one).
    pub const SKIP_SLOWLOG: u32 = 1 << 15;
    /// Redis's `CMD_PROTECTED` (DEBUG, MODULE LOAD/LOADEX/UNLOAD): refused
    /// in dispatch unless `enable-debug-command` / `enable-module-command`
    /// allow it for the client. Internal, so not in [`NAMES`]: Redis's
    /// `COMMAND INFO` does not show it either.
    pub const PROTECTED: u32 = 1 << 16;
    /// `EVAL`, `EVALSHA`, `FCALL` and their `_RO` forms: dispatch checks
    /// the flags of the script they name (`#!lua flags=`), as Redis's
    /// `getCommandFlags`. Internal, not in [`NAMES`].
    pub const SCRIPT_FLAGS: u32 = 1 << 17;
    /// SCAN and RANDOMKEY, Redis's `CMD_TOUCHES_ARBITRARY_KEYS`: the DELs
    /// of the keys they find expired are not wrapped in MULTI/EXEC with
    /// them. Internal, not in [`NAMES`] (7.0's COMMAND INFO omits it).
    pub const TOUCHES_ARBITRARY_KEYS: u32 = 1 << 18;

    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// One row of the command table.
pub struct CommandSpec {
    pub name: &'static str,
    /// Redis's arity: exact count when positive, minimum when negative
    /// (the command name counts).
    pub arity: i32,
    pub flags: u32,
    /// First key, last key (negative counts from the end), step.
    pub keys: (i32, i32, i32),
    pub group: &'static str,
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// The arguments after the name, in the docs' notation
    /// (`key value [NX|XX] [EX seconds]`); `COMMAND DOCS` is built from it.
    pub syntax: &'static str,
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
}

/// The argument positions a key range `(first, last, step)` names in a
/// call of `argc` arguments (Redis's legacy key range: a negative `last`
/// counts from the end; a range without keys names none).
pub fn key_range_positions(
    (first, last, step): (i32, i32, i32),
    argc: usize,
) -> impl Iterator<Item = usize> {
    let n = argc as i32;
    let last = if last < 0 { n + last } else { last.min(n - 1) };
    let (first, last) = if first > 0 && step > 0 {
        (first, last)
    } else {
        (1, 0)
    };
    (first..=last)
        .step_by(step.max(1) as usize)
        .map(|i| i as usize)
}

impl CommandSpec {
    pub const fn new(name: &'static str, arity: i32, flags: u32, handler: Handler) -> Self {
        CommandSpec {
            name,
            arity,
            flags,
            keys: (0, 0, 0),
            group: "generic",
            since: "1.0.0",
            summary: "",
            complexity: "O(1)",
            syntax: "",
            handler,
            subcommands: &[],
        }
    }
    pub const fn keys(mut self, first: i32, last: i32, step: i32) -> Self {
        self.keys = (first, last, step);
        self
    }
    pub const fn group(mut self, g: &'static str) -> Self {
        self.group = g;
        self
    }
    pub const fn since(mut self, s: &'static str) -> Self {
        self.since = s;
        self
    }
    pub const fn doc(mut self, summary: &'static str, syntax: &'static str) -> Self {
        self.summary = summary;
        self.syntax = syntax;
        self
    }
    pub const fn complexity(mut self, c: &'static str) -> Self {
        self.complexity = c;
        self
    }
    pub const fn subs(mut self, s: &'static [CommandSpec]) -> Self {
        self.subcommands = s;
        self
    }
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }
    pub fn arity_ok(&self, n: usize) -> bool {
        if self.arity >= 0 {
            n == self.arity as usize
        } else {
            n >= (-self.arity) as usize
        }
    }
}

/// Per-command counters for `INFO commandstats`.
#[derive(Default, Clone, Copy)]
pub struct CommandStats {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    /// Execution times, for the `/metrics` histogram.
    pub latency: crate::metrics::LatencyHistogram,
}

/// Every command, looked up by lower-cased name.
pub struct CommandTable {
    pub specs: Vec<&'static CommandSpec>,
    index: HashMap<&'static [u8], usize>,
}

impl CommandTable {
    pub fn new() -> Self {
        let mut specs: Vec<&'static CommandSpec> = Vec::new();
        for family in [
            string::COMMANDS,
            bitmap::COMMANDS,
            hyperloglog::COMMANDS,
            geo::COMMANDS,
            stream::COMMANDS,
            stream::groups::COMMANDS,
            stream::info::COMMANDS,
            dump::COMMANDS,
            sort::COMMANDS,
            keys::COMMANDS,
            connection::COMMANDS,
            server::COMMANDS,
            module::COMMANDS,
            slowlog::COMMANDS,
            latency::COMMANDS,
            lolwut::COMMANDS,
            memory::COMMANDS,
            pubsub::COMMANDS,
            multi::COMMANDS,
            hash::COMMANDS,
            hash_expire::COMMANDS,
            set::COMMANDS,
            replication::COMMANDS,
            list::COMMANDS,
            zset::COMMANDS,
            crate::scripting::eval::COMMANDS,
            crate::acl::command::COMMANDS,
            crate::cluster::command::COMMANDS,
        ] {
            for spec in family {
                specs.push(spec);
                // Subcommands get rows of their own (`config|get`), for
                // dispatch and for their own statistics.
                specs.extend(spec.subcommands.iter());
            }
        }
        let index: HashMap<&'static [u8], usize> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| (s.name.as_bytes(), i))
            .collect();
        assert_eq!(index.len(), specs.len(), "a command row is declared twice");
        CommandTable { specs, index }
    }

    /// The command's index by name, in any case.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; 48];
        if name.len() > buf.len() {
            return None;
        }
        for (d, s) in buf.iter_mut().zip(name) {
            *d = s.to_ascii_lowercase();
        }
        self.index.get(&buf[..name.len()]).copied()
    }

    pub fn len(&self) -> usize {
        self.specs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The row of `container|sub`.
    pub fn lookup_sub(&self, container: &str, sub: &[u8]) -> Option<usize> {
        let mut name = Vec::with_capacity(container.len() + 1 + sub.len());
        name.extend_from_slice(container.as_bytes());
        name.push(b'|');
        name.extend(sub.iter().map(|c| c.to_ascii_lowercase()));
        self.index.get(&name[..]).copied()
    }

    /// Top-level commands only (what `COMMAND` lists).
    pub fn top_level(&self) -> impl Iterator<Item = &'static CommandSpec> + '_ {
        self.specs.iter().copied().filter(|s| !s.name.contains('|'))
    }
}

impl Default for CommandTable {
    fn default() -> Self {
        Self::new()
    }
}

/// Redis's error texts, shared by every family.
pub mod err {
    pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
    pub const SYNTAX: &str = "ERR syntax error";
    pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
    pub const NOT_FLOAT: &str = "ERR value is not a valid float";
    pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
    pub const NO_SUCH_KEY: &str = "ERR no such key";
    pub const DB_RANGE: &str = "ERR DB index is out of range";
    pub const NOAUTH: &str = "NOAUTH Authentication required.";
    pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
    pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
    pub const POSITIVE: &str = "ERR value is out of range, must be positive";
}

/// What a handler works with: the server, the calling client, the time.
pub struct Ctx<'a> {
    pub srv: &'a mut Server,
    pub client: &'a mut Client,
    /// Unix time in milliseconds, fixed for the command.
    pub now_ms: i64,
}

impl Ctx<'_> {
    #[inline]
    pub fn out(&mut self) -> &mut crate::net::client::Reply {
        &mut self.client.out
    }
    pub fn error(&mut self, msg: &str) {
        self.client.out.error(msg)
    }
    pub fn wrong_args(&mut self, name: &str) {
        self.client.out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            name.to_ascii_lowercase()
        ));
    }
    /// Records that a key was changed (the `dirty` counter; watched keys,
    /// blocked clients and keyspace events hang off this one call).
    #[inline]
    pub fn modified(&mut self, n: u64) {
        self.srv.dirty += n;
    }

    /// Announces a keyspace event on the key in the client's database
    /// (Redis's `notifyKeyspaceEvent(class, event, key, c->db->id)`):
    /// `class` is one of the `crate::notify::NOTIFY_*` constants, `event`
    /// Redis's event name (`"set"`, `"del"`, `"expire"`, `"lpush"`, ...).
    #[inline]
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        let db = self.client.db;
        self.notify_db(class, event, key, db);
    }

    /// [`Self::notify`] for a key of another database (`MOVE`, `COPY .. DB`).
    #[inline]
    pub fn notify_db(&mut self, class: u32, event: &str, key: &[u8], db: usize) {
        if self.srv.config.notify_keyspace_events & class == 0 && self.srv.pending_events.is_empty()
        {
            return;
        }
        self.srv.flush_pending_events(Some(self.client));
        self.srv
            .notify_keyspace_event(Some(self.client), class, event, key, db);
    }

    /// Propagates `argv` instead of the command as the client sent it (the
    /// deterministic form of a command with relative times, say).
    pub fn rewrite<T: AsRef<[u8]>>(&mut self, argv: &[T]) {
        self.srv.propagation.rewrite = Some(argv.iter().map(|a| a.as_ref().to_vec()).collect());
    }
}

/// A key looked up by a command of one type: missing, of another type, or
/// the value it works on.
pub enum Typed<T> {
    Missing,
    WrongType,
    Found(T),
}

/// Looks `key` up for reading (a keyspace hit or miss) and picks its value
/// with `pick` (`None`: another type).
pub fn read_as<'a, T: ?Sized>(
    srv: &'a mut crate::server::Server,
    db: usize,
    key: &[u8],
    now: i64,
    pick: impl FnOnce(ferrokv_store::ValueRef<'a>) -> Option<&'a T>,
) -> Typed<&'a T> {
    typed(srv.lookup_read(db, key, now), pick)
}

/// Like [`read_as`] through a write lookup, for the reads of write
/// commands (Redis's `lookupKeyWrite`: a missing key is no keyspace miss,
/// no `keymiss` event).
pub fn read_for_write_as<'a, T: ?Sized>(
    srv: &'a mut crate::server::Server,
    db: usize,
    key: &[u8],
    now: i64,
    pick: impl FnOnce(ferrokv_store::ValueRef<'a>) -> Option<&'a T>,
) -> Typed<&'a T> {
    typed(srv.lookup_write(db, key, now).map(|e| &*e), pick)
}

/// A looked-up entry as the type `pick` wants.
fn typed<'a, T: ?Sized>(
    e: Option<&'a ferrokv_store::Entry>,
    pick: impl FnOnce(ferrokv_store::ValueRef<'a>) -> Option<&'a T>,
) -> Typed<&'a T> {
    match e {
        None => Typed::Missing,
        Some(e) => pick(e.value()).map_or(Typed::WrongType, Typed::Found),
    }
}

/// Looks `key` up for writing and picks its value to change in place.
pub fn write_as<'a, T: ?Sized>(
    srv: &'a mut crate::server::Server,
    db: usize,
    key: &[u8],
    now: i64,
    pick: impl FnOnce(&'a mut ferrokv_store::Value) -> Option<&'a mut T>,
) -> Typed<&'a mut T> {
    match srv.lookup_write(db, key, now) {
        None => Typed::Missing,
        Some(e) => e
            .value_mut()
            .and_then(pick)
            .map_or(Typed::WrongType, Typed::Found),
    }
}

/// Declares a family's typed lookups — `read`, `read_for_write` and
/// `write` returning `Typed` of the family's value — for a `Value`
/// variant (`typed_lookups!(Hash, Hash)`).
macro_rules! typed_lookups {
    ($t:ty, $variant:ident) => {
        type Read<'a> = $crate::commands::Typed<&'a $t>;
        type Write<'a> = $crate::commands::Typed<&'a mut $t>;

        fn read<'a>(
            srv: &'a mut $crate::server::Server,
            db: usize,
            key: &[u8],
            now: i64,
        ) -> Read<'a> {
            $crate::commands::read_as(srv, db, key, now, |v| match v {
                ferrokv_store::ValueRef::$variant(x) => Some(x),
                _ => None,
            })
        }

        /// The reads of write commands (no keyspace miss counted).
        fn read_for_write<'a>(
            srv: &'a mut $crate::server::Server,
            db: usize,
            key: &[u8],
            now: i64,
        ) -> Read<'a> {
            $crate::commands::read_for_write_as(srv, db, key, now, |v| match v {
                ferrokv_store::ValueRef::$variant(x) => Some(x),
                _ => None,
            })
        }

        fn write<'a>(
            srv: &'a mut $crate::server::Server,
            db: usize,
            key: &[u8],
            now: i64,
        ) -> Write<'a> {
            $crate::commands::write_as(srv, db, key, now, |v| match v {
                ferrokv_store::Value::$variant(x) => Some(x),
                _ => None,
            })
        }
    };
}
pub(crate) use typed_lookups;

/// Parses an integer argument, replying with Redis's error when it is not one.
pub fn parse_int(ctx: &mut Ctx, a: &[u8]) -> Option<i64> {
    match ferrokv_resp::parse_i64(a) {
        Some(v) => Some(v),
        None => {
            ctx.error(err::NOT_INTEGER);
            None
        }
    }
}

/// Parses an `int` argument as Redis's `getIntFromObjectOrReply` (database
/// indexes): an integer outside the 32-bit range has its own error.
pub fn parse_i32(ctx: &mut Ctx, a: &[u8]) -> Option<i32> {
    let v = parse_int(ctx, a)?;
    match i32::try_from(v) {
        Ok(v) => Some(v),
        Err(_) => {
            ctx.error("ERR value is out of range, value must between -2147483648 and 2147483647");
            None
        }
    }
}

/// Parses a double argument as Redis's `getDoubleFromObject` (`strtod`,
/// no trailing garbage, no spaces, `inf` allowed, NaN refused, C99 hex
/// floats such as `0x10` or `0x1.8p1` accepted). A number out of range
/// (`1e400`, or `1e-400`, which underflows to zero) is refused, as Redis
/// refuses `strtod`'s `ERANGE`; only a spelled-out infinity is infinite.
pub fn parse_f64(a: &[u8]) -> Option<f64> {
    let v = parse_f64_unchecked(a)?;
    let s = std::str::from_utf8(a).ok()?.to_ascii_lowercase();
    let literal_inf = s.trim_start_matches(['+', '-']).starts_with("inf");
    let mantissa = match s.find(if s.contains("0x") { 'p' } else { 'e' }) {
        Some(i) => &s[..i],
        None => &s[..],
    };
    let mantissa = mantissa.trim_start_matches(['+', '-']);
    let mantissa = mantissa.strip_prefix("0x").unwrap_or(mantissa);
    let nonzero = mantissa
        .bytes()
        .any(|c| c.is_ascii_alphanumeric() && c != b'0');
    if (v.is_infinite() && !literal_inf) || (v == 0.0 && nonzero) {
        return None;
    }
    Some(v)
}

fn parse_f64_unchecked(a: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(a).ok()?;
    if s.is_empty() || s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return None;
    }
    let v = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        l if l.contains("nan") => return None,
        l if l.trim_start_matches(['+', '-']).starts_with("0x") => parse_hex_f64(l)?,
        _ => s.parse::<f64>().ok()?,
    };
    Some(v)
}

/// A C99 hexadecimal float (`[+-]0x<hex>[.<hex>][p[+-]<dec>]`), lower-cased.
fn parse_hex_f64(s: &str) -> Option<f64> {
    let (neg, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let rest = rest.strip_prefix("0x")?;
    let (mantissa, exp) = match rest.split_once('p') {
        Some((m, e)) => (m, e.parse::<i32>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars().chain(frac.chars()) {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    // In i64: `0x1.8p-2147483648` must not overflow the exponent (it is
    // an ERANGE underflow, refused by the caller).
    let exp = (exp as i64 - 4 * frac.len() as i64).clamp(i32::MIN as i64, i32::MAX as i64);
    let v = v * 2f64.powi(exp as i32);
    Some(if neg { -v } else { v })
}

/// Replies with a `HELP` text in Redis's shape: an array of status lines.
pub fn reply_help(ctx: &mut Ctx, container: &str, lines: &[&str]) {
    let out = &mut ctx.client.out;
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        out.simple(l);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}

/// Case-insensitive comparison of an argument with an option name.
#[inline]
pub fn is(a: &[u8], opt: &str) -> bool {
    a.eq_ignore_ascii_case(opt.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::parse_f64;

    #[test]
    fn parse_f64_accepts_what_strtod_accepts_and_refuses_erange() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"0x10"), Some(16.0));
        assert_eq!(parse_f64(b"0X1.8P1"), Some(3.0));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"5e-324"), Some(5e-324));
        assert_eq!(parse_f64(b"0e5"), Some(0.0));
        assert_eq!(parse_f64(b"1e400"), None);
        assert_eq!(parse_f64(b"1e-400"), None);
        assert_eq!(parse_f64(b"0x1p99999"), None);
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"0x"), None);
        assert_eq!(parse_f64(b"0x1.8p-2147483648"), None);
        assert_eq!(parse_f64(b"0x1.8p2147483647"), None);
    }
}
