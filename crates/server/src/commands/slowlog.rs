//! The slow log family: SLOWLOG GET, LEN, RESET, HELP, and the log itself.
//!
//! The dispatcher already times every command (for `INFO commandstats`);
//! a command that took at least `slowlog-log-slower-than` µs is pushed
//! here with its arguments cut as Redis cuts them (at most 32 arguments,
//! each at most 128 bytes), so one huge `MSET` cannot make the log hold
//! its whole payload. The newest entry is at the front; the log keeps
//! `slowlog-max-len` entries.
//!
//! # Hostile input
//!
//! Audited (issue #15): `SLOWLOG GET` takes any count from -1 to
//! `LONG_MAX` (below -1, Redis's error) and answers at most the
//! `slowlog-max-len` entries held; entries keep at most 32 arguments of
//! 128 bytes, so no request makes the log hold its payload.

use super::flags::*;
use super::{reply_help, CommandSpec, Ctx};
use ferrokv_resp::Args;
use std::collections::VecDeque;

/// Arguments kept per entry (the last one says how many were left out).
pub const MAX_ARGC: usize = 32;
/// Bytes kept per argument.
pub const MAX_STRING: usize = 128;

const fn cmd(name: &'static str, arity: i32, flags: u32, h: super::Handler) -> CommandSpec {
    CommandSpec::new(name, arity, flags, h)
        .group("server")
        .since("2.2.12")
}

pub static COMMANDS: &[CommandSpec] = &[cmd("slowlog", -2, 0, slowlog_help)
    .doc("A container for slow log commands.", "")
    .subs(SUBS)];

static SUBS: &[CommandSpec] = &[
    cmd("slowlog|get", -2, ADMIN | LOADING | STALE, slowlog_get)
        .complexity("O(N) where N is the number of entries returned")
        .doc("Returns the slow log's entries.", "[count]"),
    cmd("slowlog|len", 2, ADMIN | LOADING | STALE, slowlog_len)
        .doc("Returns the number of entries in the slow log.", ""),
    cmd("slowlog|reset", 2, ADMIN | LOADING | STALE, slowlog_reset)
        .complexity("O(N) where N is the number of entries in the slowlog")
        .doc("Clears all entries from the slow log.", ""),
    cmd("slowlog|help", 2, LOADING | STALE, slowlog_help)
        .since("6.2.0")
        .doc("Show helpful text about the different subcommands", ""),
];

/// One logged command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowLogEntry {
    pub id: u64,
    pub unix_secs: i64,
    pub duration_usec: u64,
    pub argv: Vec<Vec<u8>>,
    pub peer: String,
    pub client_name: Vec<u8>,
}

#[derive(Default, Debug)]
pub struct SlowLog {
    /// Newest first.
    entries: VecDeque<SlowLogEntry>,
    next_id: u64,
}

impl SlowLog {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The id of the newest entry ever pushed (ids survive RESET).
    pub fn last_id(&self) -> Option<u64> {
        self.next_id.checked_sub(1)
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// Logs a command if it was slow enough (Redis's
    /// `slowlogPushEntryIfNeeded`): `threshold` < 0 disables the log,
    /// 0 logs every command.
    #[allow(clippy::too_many_arguments)]
    pub fn push_if_slow(
        &mut self,
        threshold: i64,
        max_len: u64,
        duration_usec: u64,
        args: &Args,
        unix_secs: i64,
        // `None`: a client with no connection (a script's), "?:0" as Redis.
        peer: Option<&crate::net::conn::Addr>,
        client_name: Option<&[u8]>,
    ) {
        if threshold < 0 || max_len == 0 || (duration_usec as i128) < threshold as i128 {
            return;
        }
        let argv = trim_argv(args);
        self.entries.push_front(SlowLogEntry {
            id: self.next_id,
            unix_secs,
            duration_usec,
            argv,
            peer: peer.map_or_else(|| "?:0".to_string(), |p| p.to_string()),
            client_name: client_name.unwrap_or_default().to_vec(),
        });
        self.next_id += 1;
        while self.entries.len() as u64 > max_len {
            self.entries.pop_back();
        }
    }
}

/// The arguments as Redis keeps them: at most [`MAX_ARGC`], the last of
/// which says how many more there were; each at most [`MAX_STRING`] bytes
/// followed by how many more there were; passwords (`AUTH`'s arguments,
/// `HELLO ... AUTH user pass`, `ACL SETUSER`'s rules) redacted as Redis
/// redacts them.
fn trim_argv(args: &Args) -> Vec<Vec<u8>> {
    let argc = args.len();
    let kept = argc.min(MAX_ARGC);
    let is_auth = super::is(args.get(0), "auth");
    let is_hello = super::is(args.get(0), "hello");
    // ACL SETUSER: the user name and every rule (passwords among them).
    let is_setuser =
        argc >= 2 && super::is(args.get(0), "acl") && super::is(args.get(1), "setuser");
    let mut hello_secret_until = 0;
    let mut out = Vec::with_capacity(kept);
    for (j, a) in args.iter().take(kept).enumerate() {
        let secret = j > 0 && (is_auth || j <= hello_secret_until || (is_setuser && j >= 2));
        if is_hello && j >= 2 && hello_secret_until < j && super::is(a, "auth") {
            hello_secret_until = j + 2;
        }
        if kept != argc && j == kept - 1 {
            out.push(format!("... ({} more arguments)", argc - kept + 1).into_bytes());
        } else if secret {
            out.push(b"(redacted)".to_vec());
        } else if a.len() > MAX_STRING {
            let mut v = a[..MAX_STRING].to_vec();
            v.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_STRING).as_bytes());
            out.push(v);
        } else {
            out.push(a.to_vec());
        }
    }
    out
}

/// SLOWLOG GET [count]
fn slowlog_get(ctx: &mut Ctx, args: Args) {
    let mut count: i64 = 10;
    if args.len() == 3 {
        // One message for "not a number" and "too small", as Redis's
        // `getRangeLongFromObjectOrReply`.
        match ferrokv_resp::parse_i64(args.get(2)) {
            Some(c) if c >= -1 => count = c,
            _ => {
                ctx.error("ERR count should be greater than or equal to -1");
                return;
            }
        }
    } else if args.len() > 3 {
        ctx.wrong_args("slowlog|get");
        return;
    }
    let log = &ctx.srv.slowlog;
    let n = if count == -1 {
        log.len()
    } else {
        log.len().min(count as usize)
    };
    let out = &mut ctx.client.out;
    out.array(n);
    for e in log.entries.iter().take(n) {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.unix_secs);
        out.int(e.duration_usec as i64);
        out.array(e.argv.len());
        for a in &e.argv {
            out.bulk(a);
        }
        out.bulk(e.peer.as_bytes());
        out.bulk(&e.client_name);
    }
}

/// SLOWLOG LEN
fn slowlog_len(ctx: &mut Ctx, _args: Args) {
    let n = ctx.srv.slowlog.len();
    ctx.client.out.int(n as i64);
}

/// SLOWLOG RESET
fn slowlog_reset(ctx: &mut Ctx, _args: Args) {
    ctx.srv.slowlog.reset();
    ctx.client.out.ok();
}

/// SLOWLOG HELP
fn slowlog_help(ctx: &mut Ctx, _args: Args) {
    reply_help(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(v: &[&[u8]]) -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for a in v {
            ranges.push((buf.len(), a.len()));
            buf.extend_from_slice(a);
        }
        (buf, ranges)
    }

    fn push(log: &mut SlowLog, threshold: i64, max_len: u64, usec: u64, argv: &[&[u8]]) {
        let (buf, ranges) = args_of(argv);
        let args = Args::new(&buf, &ranges);
        let addr = crate::net::conn::Addr::Ip("127.0.0.1:5000".parse().unwrap());
        log.push_if_slow(threshold, max_len, usec, &args, 1, Some(&addr), None);
    }

    #[test]
    fn threshold_minus_one_disables_and_zero_logs_everything() {
        let mut log = SlowLog::default();
        push(&mut log, -1, 128, 1_000_000, &[b"get", b"k"]);
        assert!(log.is_empty());
        push(&mut log, 0, 128, 0, &[b"get", b"k"]);
        assert_eq!(log.len(), 1);
        push(&mut log, 100, 128, 99, &[b"get", b"k"]);
        assert_eq!(log.len(), 1);
        push(&mut log, 100, 128, 100, &[b"get", b"k"]);
        assert_eq!(log.len(), 2);
        assert_eq!(log.last_id(), Some(1));
    }

    #[test]
    fn acl_setuser_rules_are_redacted() {
        let mut log = SlowLog::default();
        push(
            &mut log,
            0,
            10,
            0,
            &[b"ACL", b"SETUSER", b"u", b">pw", b"on"],
        );
        let r = b"(redacted)".to_vec();
        assert_eq!(
            log.entries[0].argv,
            vec![
                b"ACL".to_vec(),
                b"SETUSER".to_vec(),
                r.clone(),
                r.clone(),
                r
            ]
        );
    }

    #[test]
    fn passwords_are_redacted() {
        let mut log = SlowLog::default();
        push(&mut log, 0, 10, 0, &[b"AUTH", b"user", b"pw"]);
        push(
            &mut log,
            0,
            10,
            0,
            &[b"HELLO", b"3", b"AUTH", b"u", b"pw", b"SETNAME", b"n"],
        );
        let r = b"(redacted)".to_vec();
        assert_eq!(
            log.entries[1].argv,
            vec![b"AUTH".to_vec(), r.clone(), r.clone()]
        );
        assert_eq!(
            log.entries[0].argv,
            vec![
                b"HELLO".to_vec(),
                b"3".to_vec(),
                b"AUTH".to_vec(),
                r.clone(),
                r,
                b"SETNAME".to_vec(),
                b"n".to_vec()
            ]
        );
    }

    #[test]
    fn max_len_drops_the_oldest() {
        let mut log = SlowLog::default();
        for i in 0..5u8 {
            push(&mut log, 0, 3, 0, &[b"echo", &[b'0' + i]]);
        }
        let ids: Vec<u64> = log.entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, vec![4, 3, 2]);
    }

    #[test]
    fn long_arguments_and_argument_lists_are_cut_as_redis_cuts_them() {
        let mut log = SlowLog::default();
        let big = vec![b'x'; 200];
        let mut argv: Vec<&[u8]> = vec![b"rpush", b"k"];
        argv.push(&big);
        argv.extend(std::iter::repeat_n(&b"v"[..], 40));
        push(&mut log, 0, 10, 0, &argv);
        let e = &log.entries[0];
        assert_eq!(e.argv.len(), 32);
        let mut want = vec![b'x'; 128];
        want.extend_from_slice(b"... (72 more bytes)");
        assert_eq!(e.argv[2], want);
        assert_eq!(e.argv[31], b"... (12 more arguments)".to_vec());
    }
}
