//! `MONITOR`: clients that watch every command the server runs, as Redis
//! 7.0.15 shows them (its `replicationFeedMonitors`).
//!
//! A command is shown *after* it ran, by the accounting step of dispatch
//! (`Server::call_from`), so the line names the database the command left
//! the client in (`SELECT 3` shows `[3 ...]`) and a transaction reads
//! `MULTI`, its commands, `EXEC`. Not shown, as in Redis: commands refused
//! before they ran (unknown, arity, `NOAUTH`, OOM, ...), `admin` and
//! `skip_monitor` commands (CONFIG, CLIENT LIST, SLOWLOG, MONITOR, ...),
//! commands replayed from the AOF, and a blocked command when it is served
//! (it was shown when it blocked). The script commands (`EVAL*`, `FCALL*`)
//! are `skip_monitor` and show themselves when their handler starts, so
//! the commands their script runs (`[db lua]`) come after them.
//!
//! One line, one simple string:
//! `+<unix s>.<µs, 6 digits> [<db> <ip:port | unix:<path> | lua>] "arg" ...`,
//! each argument quoted as `sdscatrepr` does, secrets of `AUTH`, `HELLO
//! ... AUTH` and `MIGRATE ... AUTH/AUTH2` replaced by `(redacted)` as the
//! command's own parsing would have redacted them.
//!
//! Cost when nobody monitors: one test of an empty list per command
//! ([`Monitors::is_empty`]). The line is formatted once and copied to each
//! monitor's output buffer, which is bounded by the `normal` (or, while
//! subscribed, `pubsub`) class of `client-output-buffer-limit`: a monitor
//! that does not read is closed, as Redis closes it. Where that class has
//! no hard limit (Redis's default for normal clients, under which a slow
//! Redis monitor grows the server without end), `client-reply-backpressure`
//! (8 MiB by default; 0 for Redis's behaviour) is the monitor's hard limit:
//! backpressure, which bounds what other clients are owed, cannot hold a
//! monitor back, since what it is owed comes from everybody's commands.

use crate::commands::is;
use crate::net::client::{Client, ReplyMode};
use crate::net::conn::Addr;
use crate::server::Server;
use ferrokv_resp::Args;
use std::time::{SystemTime, UNIX_EPOCH};

/// The connections in monitor mode, by slab token, in the order they
/// started monitoring (the order Redis feeds them).
#[derive(Default)]
pub struct Monitors {
    tokens: Vec<usize>,
}

impl Monitors {
    /// True when no client monitors: the hot path's only test.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn add(&mut self, token: usize) {
        if !self.tokens.contains(&token) {
            self.tokens.push(token);
        }
    }

    /// Forgets a monitor (RESET, or its connection closing).
    pub fn remove(&mut self, token: usize) {
        self.tokens.retain(|&t| t != token);
    }
}

/// Who ran the command, as the line's second field shows it.
pub enum Source<'a> {
    /// A script (EVAL or a function): Redis 7.0 prints `lua` for both.
    Script,
    Peer(&'a Addr),
}

/// Appends `arg` quoted and escaped as Redis's `sdscatrepr`: `\\ \" \n \r
/// \t \a \b` by name, other bytes outside the printable ASCII range as
/// `\xhh` (lowercase hex).
pub fn quote_into(out: &mut Vec<u8>, arg: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(&[
                b'\\',
                b'x',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]),
        }
    }
    out.push(b'"');
}

/// The positions of the arguments Redis 7.0 redacts for this command, in
/// the order its handler would have redacted them: `AUTH`'s password (and
/// user) when it has at most three arguments; each `AUTH user pass` of
/// `HELLO` its option loop reaches (it stops at a bad protocol version, a
/// bad option or a failed authentication — `auth_ok` tells which would
/// fail); `MIGRATE`'s `AUTH pass` and `AUTH2 user pass` before `KEYS` or
/// the first bad option.
pub fn redacted_args(args: &Args, auth_ok: impl Fn(&[u8], &[u8]) -> bool) -> Vec<usize> {
    let name = args.get(0);
    let n = args.len();
    let mut out = Vec::new();
    if is(name, "auth") {
        if n <= 3 {
            out.extend(1..n);
        }
    } else if is(name, "acl") {
        // ACL SETUSER's rules hold passwords: the user name and every rule.
        if n >= 3 && is(args.get(1), "setuser") {
            out.extend(2..n);
        }
    } else if is(name, "hello") {
        if n >= 2 && !matches!(ferrokv_resp::parse_i64(args.get(1)), Some(2 | 3)) {
            return out;
        }
        let mut j = 2;
        while j < n {
            let more = n - 1 - j;
            let opt = args.get(j);
            if is(opt, "auth") && more >= 2 {
                out.extend([j + 1, j + 2]);
                if !auth_ok(args.get(j + 1), args.get(j + 2)) {
                    break;
                }
                j += 3;
            } else if is(opt, "setname") && more >= 1 {
                j += 2;
            } else {
                break;
            }
        }
    } else if is(name, "migrate") {
        let mut j = 6;
        while j < n {
            let more = n - 1 - j;
            let opt = args.get(j);
            if is(opt, "copy") || is(opt, "replace") {
                j += 1;
            } else if is(opt, "auth") && more >= 1 {
                out.push(j + 1);
                j += 2;
            } else if is(opt, "auth2") && more >= 2 {
                out.extend([j + 1, j + 2]);
                j += 3;
            } else {
                // KEYS ends the options; anything else is an error.
                break;
            }
        }
    }
    out
}

/// Whether Redis may redact some of this command's arguments: three name
/// checks, made only while somebody monitors.
fn needs_redaction(name: &[u8]) -> bool {
    is(name, "auth") || is(name, "hello") || is(name, "migrate") || is(name, "acl")
}

/// One monitor line, `\r\n` included.
pub fn format_line(
    out: &mut Vec<u8>,
    now: SystemTime,
    db: usize,
    source: Source,
    args: &Args,
    redacted: &[usize],
) {
    use std::io::Write;
    let t = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let _ = write!(out, "+{}.{:06} [{db} ", t.as_secs(), t.subsec_micros());
    match source {
        Source::Script => out.extend_from_slice(b"lua"),
        Source::Peer(Addr::Unix(path)) => {
            let _ = write!(out, "unix:{}", path.display());
        }
        Source::Peer(addr) => {
            let _ = write!(out, "{addr}");
        }
    }
    out.push(b']');
    for (i, a) in args.iter().enumerate() {
        out.push(b' ');
        if redacted.contains(&i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote_into(out, a);
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// MONITOR
///
/// Answers `+OK` and turns the connection into a monitor. A connection that
/// already monitors (or is a replica) gets no reply at all, as in Redis;
/// one inside EXEC is refused, as Redis refuses a client that may not
/// block (`CLIENT_DENY_BLOCKING`).
pub fn monitor(ctx: &mut crate::commands::Ctx, _args: Args) {
    if ctx.client.in_exec {
        ctx.error("ERR MONITOR isn't allowed for DENY BLOCKING client");
        return;
    }
    if ctx.client.monitor
        || ctx.srv.repl.client_kind(ctx.client.id) != crate::replication::ClientKind::Normal
    {
        return;
    }
    ctx.client.monitor = true;
    ctx.srv.monitors.add(ctx.client.token);
    ctx.client.out.ok();
}

impl Server {
    /// Shows a command that just ran to the monitors, unless Redis would
    /// not: while the AOF is replayed, and when a blocked command runs
    /// again to be served. Callers test [`Monitors::is_empty`] first.
    pub fn feed_monitors(&mut self, current: &mut Client, args: &Args) {
        if self.loading_aof || self.blocking.serving_key().is_some() {
            return;
        }
        let redacted = if needs_redaction(args.get(0)) {
            let acl = &self.acl;
            redacted_args(args, |u, p| acl.authenticate(u, p).is_some())
        } else {
            Vec::new()
        };
        let source = if current.id == crate::scripting::SCRIPT_CLIENT_ID {
            Source::Script
        } else {
            Source::Peer(&current.addr)
        };
        let mut line = Vec::with_capacity(64 + args.iter().map(|a| a.len() + 3).sum::<usize>());
        format_line(
            &mut line,
            SystemTime::now(),
            current.db,
            source,
            args,
            &redacted,
        );
        for i in 0..self.monitors.tokens.len() {
            let t = self.monitors.tokens[i];
            if t == current.token {
                // Its own command: after its reply, in its buffer, where
                // `CLIENT REPLY` applies to both (see `Server::execute`).
                if !(current.close_after_reply || current.close_asap) {
                    current.out.buf.extend_from_slice(&line);
                }
                continue;
            }
            self.deliver_monitor_line(t, &line);
        }
    }

    /// Appends a line to monitor `t`'s output and queues it for writing;
    /// past the hard limit of its class the monitor is closed (and gets
    /// nothing more meanwhile, as Redis's `prepareClientToWrite` refuses a
    /// client that is closing).
    fn deliver_monitor_line(&mut self, t: usize, line: &[u8]) {
        let Some(Some(c)) = self.clients.get(t) else {
            // Out of its slot: being served further up the stack (never a
            // monitor in practice: monitors cannot run scripts).
            return;
        };
        let limit = self.output_limit_for(c);
        // Lines are not the monitor's own replies, so backpressure cannot
        // hold it back: with no hard limit in its class (Redis's default
        // for normal clients), `client-reply-backpressure` is its hard
        // limit, or a monitor that does not read would grow the server's
        // memory without end.
        let hard = match limit.hard {
            0 => self.config.client_reply_backpressure,
            h => h,
        };
        let Some(Some(c)) = self.clients.get_mut(t) else {
            return;
        };
        if c.close_asap || c.close_after_reply || c.reply_mode == ReplyMode::Off {
            return;
        }
        c.out.buf.extend_from_slice(line);
        if !c.pending_write {
            c.pending_write = true;
            self.pending_writes.push(t);
        }
        let pending = c.pending_output() as u64;
        if limit.soft > 0 && pending >= limit.soft {
            c.soft_limit_since
                .get_or_insert_with(std::time::Instant::now);
        }
        if hard > 0 && pending >= hard {
            tracing::warn!(
                "Client id={} addr={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                c.id,
                c.addr
            );
            c.close_asap = true;
            self.stats.client_outbuf_limit_disconnections += 1;
            self.close_queue.push(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_of(parts: &[&[u8]]) -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for p in parts {
            ranges.push((buf.len(), p.len()));
            buf.extend_from_slice(p);
        }
        (buf, ranges)
    }

    fn redacted(parts: &[&str], ok: bool) -> Vec<usize> {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        let (buf, ranges) = args_of(&bytes);
        redacted_args(&Args::new(&buf, &ranges), |_, _| ok)
    }

    #[test]
    fn quoting_follows_sdscatrepr() {
        let mut out = Vec::new();
        quote_into(&mut out, b"a\\b\"c\n\r\t\x07\x08\x00\xff\x7f \xc3");
        assert_eq!(
            out,
            b"\"a\\\\b\\\"c\\n\\r\\t\\a\\b\\x00\\xff\\x7f \\xc3\"".to_vec()
        );
    }

    #[test]
    fn line_shape_for_tcp_unix_and_scripts() {
        let (buf, ranges) = args_of(&[b"SET", b"k", b"secret"]);
        let args = Args::new(&buf, &ranges);
        let at = UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_000_042);
        let mut out = Vec::new();
        let tcp = Addr::Ip("127.0.0.1:5000".parse().unwrap());
        format_line(&mut out, at, 3, Source::Peer(&tcp), &args, &[2]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "+1700000000.000042 [3 127.0.0.1:5000] \"SET\" \"k\" \"(redacted)\"\r\n"
        );
        let mut out = Vec::new();
        let unix = Addr::Unix(std::path::Path::new("/tmp/s.sock").into());
        format_line(&mut out, at, 0, Source::Peer(&unix), &args, &[]);
        assert!(out.starts_with(b"+1700000000.000042 [0 unix:/tmp/s.sock] \"SET\""));
        let mut out = Vec::new();
        format_line(&mut out, at, 0, Source::Script, &args, &[]);
        assert!(out.starts_with(b"+1700000000.000042 [0 lua] \"SET\""));
    }

    #[test]
    fn auth_is_redacted_only_in_its_valid_forms() {
        assert_eq!(redacted(&["AUTH", "p"], true), vec![1]);
        assert_eq!(redacted(&["auth", "u", "p"], false), vec![1, 2]);
        assert!(redacted(&["AUTH", "a", "b", "c"], true).is_empty());
    }

    #[test]
    fn hello_redacts_what_its_option_loop_reaches() {
        assert_eq!(
            redacted(&["HELLO", "3", "AUTH", "u", "p", "SETNAME", "n"], true),
            vec![3, 4]
        );
        assert!(redacted(&["HELLO", "x", "AUTH", "u", "p"], true).is_empty());
        assert!(redacted(&["HELLO", "4", "AUTH", "u", "p"], true).is_empty());
        assert!(redacted(&["HELLO", "3", "FOO", "AUTH", "u", "p"], true).is_empty());
        assert!(redacted(&["HELLO", "3", "AUTH", "u"], true).is_empty());
        assert_eq!(
            redacted(&["HELLO", "2", "AUTH", "u", "p", "AUTH", "v", "q"], false),
            vec![3, 4]
        );
        assert_eq!(
            redacted(&["HELLO", "2", "AUTH", "u", "p", "AUTH", "v", "q"], true),
            vec![3, 4, 6, 7]
        );
    }

    #[test]
    fn migrate_redacts_auth_options_before_keys() {
        let m = ["MIGRATE", "h", "1", "k", "0", "10"];
        let with = |rest: &[&str]| {
            let mut v = m.to_vec();
            v.extend_from_slice(rest);
            redacted(&v, true)
        };
        assert_eq!(with(&["AUTH", "pw", "BAD", "AUTH", "pw2"]), vec![7]);
        assert_eq!(with(&["COPY", "REPLACE", "auth2", "u", "p"]), vec![9, 10]);
        assert!(with(&["KEYS", "AUTH", "pw"]).is_empty());
        assert!(with(&["AUTH"]).is_empty());
        assert!(with(&["AUTH2", "u"]).is_empty());
    }
}
