//! Guards Lua scripting and Functions against Redis 7.0: how Lua values
//! become RESP2 and RESP3 replies (checked byte for byte on raw
//! connections, `HELLO 3` included), `redis.setresp(3)` and the RESP3
//! replies a script then sees, `redis.call` vs `redis.pcall` and their exact
//! error texts (with the ` script: <sha>, on @user_script:<line>.` suffix
//! `redis.call` errors carry), commands refused inside scripts, the
//! read-only globals, KEYS/ARGV per call, the `redis.*` helpers, SELECT
//! inside a script, the script cache (EVALSHA, SCRIPT LOAD/EXISTS/FLUSH),
//! EVAL_RO, shebang flags, scripts inside MULTI, `math.random`, the bundled
//! `bit`/`struct`/`cjson`/`cmsgpack` libraries, and Functions (FUNCTION
//! LOAD/LIST/DELETE/FLUSH/DUMP/RESTORE/STATS, FCALL/FCALL_RO and their
//! flags).
//!
//! Every test starts its own server: the script cache and the function
//! libraries are server-wide, and several tests flush them.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run every assertion against the real
//! `redis-server` (that is how the expected replies were taken).
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::{wait_for, Raw, ServerProcess};
use ferrokv_resp::Frame;

/// A fresh server of the target under test.
fn fresh() -> ServerProcess {
    own_server(&[])
}

/// Sends `args` and asserts the exact bytes of the reply.
fn exact<T: AsRef<[u8]>>(r: &mut Raw, args: &[T], expected: impl AsRef<[u8]>) {
    let (_, got) = r
        .try_cmd_bytes(args)
        .unwrap_or_else(|e| panic!("{:?}: {e}", show_args(args)));
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected.as_ref()),
        "{:?}",
        show_args(args)
    );
}

/// Runs every `(args, expected bytes)` pair through [`exact`].
fn exact_all(r: &mut Raw, cases: &[(&[&str], &str)]) {
    for (args, expected) in cases {
        exact(r, args, expected);
    }
}

fn show_args<T: AsRef<[u8]>>(args: &[T]) -> Vec<String> {
    args.iter()
        .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
        .collect()
}

/// A raw connection that has switched to RESP3.
fn resp3(s: &ServerProcess) -> Raw {
    let mut r = s.raw();
    let hello = r.cmd(&["HELLO", "3"]);
    assert!(matches!(hello, Frame::Map(_)), "HELLO 3: {hello:?}");
    r
}

use common::sha1_hex;

/// The error reply `redis.call` gives for `text` raised at `line` of
/// `script`: Redis appends the script's SHA-1 and the line.
fn script_err(text: &str, script: &str, line: u32) -> String {
    format!(
        "-{text} script: {}, on @user_script:{line}.\r\n",
        sha1_hex(script.as_bytes())
    )
}

/// Asserts that `EVAL script 0` fails with `text` at `line`, suffix and all.
fn eval_fails(r: &mut Raw, script: &str, text: &str, line: u32) {
    exact(r, &["EVAL", script, "0"], script_err(text, script, line));
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn lua_values_convert_to_resp2_replies() {
    let s = fresh();
    let mut r = s.raw();
    exact_all(
        &mut r,
        &[
            // Numbers are truncated towards zero to integers.
            (&["EVAL", "return 3.99", "0"], ":3\r\n"),
            (&["EVAL", "return -3.99", "0"], ":-3\r\n"),
            (
                &["EVAL", "return {1, 2.9, -2.9}", "0"],
                "*3\r\n:1\r\n:2\r\n:-2\r\n",
            ),
            // 2^53 + 1 is not a double: it comes back as 2^53.
            (
                &["EVAL", "return 9007199254740993", "0"],
                ":9007199254740992\r\n",
            ),
            // Out of range (and NaN, inf) is C's cast on x86-64: LLONG_MIN.
            (&["EVAL", "return 1e20", "0"], ":-9223372036854775808\r\n"),
            (&["EVAL", "return 0/0", "0"], ":-9223372036854775808\r\n"),
            (
                &["EVAL", "return math.huge", "0"],
                ":-9223372036854775808\r\n",
            ),
            (&["EVAL", "return 'x'", "0"], "$1\r\nx\r\n"),
            (&["EVAL", "return 'a\\0b'", "0"], "$3\r\na\0b\r\n"),
            (&["EVAL", "return ''", "0"], "$0\r\n\r\n"),
            // Only the first of several return values counts.
            (&["EVAL", "return 'x', 'y'", "0"], "$1\r\nx\r\n"),
            (&["EVAL", "return true", "0"], ":1\r\n"),
            (&["EVAL", "return false", "0"], "$-1\r\n"),
            (&["EVAL", "return nil", "0"], "$-1\r\n"),
            (&["EVAL", "return", "0"], "$-1\r\n"),
            // Arrays stop at the first nil; nested tables nest.
            (&["EVAL", "return {1,2,nil,3}", "0"], "*2\r\n:1\r\n:2\r\n"),
            (
                &["EVAL", "return {1,'a',{2,3},true,false}", "0"],
                "*5\r\n:1\r\n$1\r\na\r\n*2\r\n:2\r\n:3\r\n:1\r\n$-1\r\n",
            ),
            (&["EVAL", "return {}", "0"], "*0\r\n"),
            // Hash keys are not part of an array.
            (&["EVAL", "return {a=1, b=2}", "0"], "*0\r\n"),
            // Status and error tables.
            (&["EVAL", "return {ok='fine'}", "0"], "+fine\r\n"),
            (&["EVAL", "return {err='bad thing'}", "0"], "-bad thing\r\n"),
            (&["EVAL", "return {err='ERR bad'}", "0"], "-ERR bad\r\n"),
            (&["EVAL", "return {err=''}", "0"], "-\r\n"),
            // `err` wins over `ok` and over array items.
            (&["EVAL", "return {ok='a', err='b'}", "0"], "-b\r\n"),
            (&["EVAL", "return {err='b', 1, 2}", "0"], "-b\r\n"),
            // Not strings: the table is an (empty) array.
            (&["EVAL", "return {ok=1}", "0"], "*0\r\n"),
            (&["EVAL", "return {err=1}", "0"], "*0\r\n"),
            (
                &["EVAL", "return {1, {err='inner'}, {ok='fine'}}", "0"],
                "*3\r\n:1\r\n-inner\r\n+fine\r\n",
            ),
            // RESP3-only types degrade in RESP2.
            (&["EVAL", "return {double=3.5}", "0"], "$3\r\n3.5\r\n"),
            (&["EVAL", "return {double=3}", "0"], "$1\r\n3\r\n"),
            (
                &["EVAL", "return {double=0.1}", "0"],
                "$19\r\n0.10000000000000001\r\n",
            ),
            (
                &["EVAL", "return {map={a=1}}", "0"],
                "*2\r\n$1\r\na\r\n:1\r\n",
            ),
            (&["EVAL", "return {set={a=true}}", "0"], "*1\r\n$1\r\na\r\n"),
            (
                &[
                    "EVAL",
                    "return {big_number='123456789012345678901234567890'}",
                    "0",
                ],
                "$30\r\n123456789012345678901234567890\r\n",
            ),
            (
                &[
                    "EVAL",
                    "return {verbatim_string={format='txt', string='hello'}}",
                    "0",
                ],
                "$5\r\nhello\r\n",
            ),
            // redis.call replies come back as the same types.
            (&["EVAL", "return redis.call('ping')", "0"], "+PONG\r\n"),
            (
                &["EVAL", "return redis.call('ping')['ok']", "0"],
                "$4\r\nPONG\r\n",
            ),
            (
                &["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "k"],
                "+OK\r\n",
            ),
            (
                &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
                "$1\r\nv\r\n",
            ),
            (
                &["EVAL", "return redis.call('get', 'missing')", "0"],
                "$-1\r\n",
            ),
            // A nil bulk is Lua false in RESP2 mode.
            (
                &["EVAL", "return type(redis.call('get', 'missing'))", "0"],
                "$7\r\nboolean\r\n",
            ),
            (&["EVAL", "return redis.call('incr', 'n')", "0"], ":1\r\n"),
            // Numbers passed to redis.call become their text.
            (
                &["EVAL", "return redis.call('set', 'f', 5.5)", "0"],
                "+OK\r\n",
            ),
            (
                &["EVAL", "return redis.call('get', 'f')", "0"],
                "$3\r\n5.5\r\n",
            ),
        ],
    );
}

#[test]
fn lua_values_convert_to_resp3_replies() {
    let s = fresh();
    let mut r = resp3(&s);
    exact_all(
        &mut r,
        &[
            (&["EVAL", "return 3.5", "0"], ":3\r\n"),
            (&["EVAL", "return 'x'", "0"], "$1\r\nx\r\n"),
            (&["EVAL", "return true", "0"], ":1\r\n"),
            // Without redis.setresp(3), false and nil are RESP3 nulls.
            (&["EVAL", "return false", "0"], "_\r\n"),
            (&["EVAL", "return nil", "0"], "_\r\n"),
            (
                &["EVAL", "return {1, false, 2}", "0"],
                "*3\r\n:1\r\n_\r\n:2\r\n",
            ),
            (&["EVAL", "return {double=3.5}", "0"], ",3.5\r\n"),
            (
                &["EVAL", "return {map={a=1}}", "0"],
                "%1\r\n$1\r\na\r\n:1\r\n",
            ),
            (&["EVAL", "return {set={a=true}}", "0"], "~1\r\n$1\r\na\r\n"),
            (
                &[
                    "EVAL",
                    "return {big_number='123456789012345678901234567890'}",
                    "0",
                ],
                "(123456789012345678901234567890\r\n",
            ),
            (
                &[
                    "EVAL",
                    "return {verbatim_string={format='txt', string='hello'}}",
                    "0",
                ],
                "=9\r\ntxt:hello\r\n",
            ),
            (&["EVAL", "return {ok='fine'}", "0"], "+fine\r\n"),
            (&["EVAL", "return {err='bad'}", "0"], "-bad\r\n"),
            (
                &["EVAL", "return redis.call('get', 'missing')", "0"],
                "_\r\n",
            ),
            // Without setresp(3) the script sees RESP2 replies.
            (&["HSET", "h", "a", "1"], ":1\r\n"),
            (
                &["EVAL", "return redis.call('hgetall', 'h')", "0"],
                "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
            ),
            (
                &["EVAL", "return redis.call('hgetall', 'nokey')", "0"],
                "*0\r\n",
            ),
        ],
    );
}

#[test]
fn setresp_3_shows_resp3_replies_to_the_script() {
    let s = fresh();
    let mut r3 = resp3(&s);
    let mut r2 = s.raw();
    exact_all(
        &mut r2,
        &[
            (&["HSET", "h", "a", "1"], ":1\r\n"),
            (&["SADD", "st", "x"], ":1\r\n"),
            (&["ZADD", "z", "1.5", "m"], ":1\r\n"),
        ],
    );
    // (script, reply to a RESP3 caller, reply to a RESP2 caller)
    let cases: &[(&str, &str, &str)] = &[
        (
            "redis.setresp(3); return redis.call('hgetall', 'h')",
            "%1\r\n$1\r\na\r\n$1\r\n1\r\n",
            "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        ),
        (
            "redis.setresp(3); return redis.call('hgetall', 'nokey')",
            "%0\r\n",
            "*0\r\n",
        ),
        (
            "redis.setresp(3); return redis.call('smembers', 'st')",
            "~1\r\n$1\r\nx\r\n",
            "*1\r\n$1\r\nx\r\n",
        ),
        (
            "redis.setresp(3); return redis.call('zscore', 'z', 'm')",
            ",1.5\r\n",
            "$3\r\n1.5\r\n",
        ),
        (
            "redis.setresp(3); return redis.call('zrange', 'z', 0, -1, 'withscores')",
            "*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n",
            "*1\r\n*2\r\n$1\r\nm\r\n$3\r\n1.5\r\n",
        ),
        (
            "redis.setresp(3); return redis.call('get', 'nokey')",
            "_\r\n",
            "$-1\r\n",
        ),
        // The script sees a double as {double=n}, a map as {map=...}.
        (
            "redis.setresp(3); return type(redis.call('zscore', 'z', 'm').double)",
            "$6\r\nnumber\r\n",
            "$6\r\nnumber\r\n",
        ),
        (
            "redis.setresp(3); return redis.call('zscore', 'z', 'm').double",
            ":1\r\n",
            ":1\r\n",
        ),
        (
            "redis.setresp(3); return type(redis.call('hgetall', 'h').map)",
            "$5\r\ntable\r\n",
            "$5\r\ntable\r\n",
        ),
        (
            "redis.setresp(3); return redis.call('hgetall', 'h').map.a",
            "$1\r\n1\r\n",
            "$1\r\n1\r\n",
        ),
        (
            "redis.setresp(3); return type(redis.call('get', 'nokey'))",
            "$3\r\nnil\r\n",
            "$3\r\nnil\r\n",
        ),
        // With setresp(3), Lua booleans are RESP3 booleans (RESP2: 1 / 0).
        ("redis.setresp(3); return true", "#t\r\n", ":1\r\n"),
        ("redis.setresp(3); return false", "#f\r\n", ":0\r\n"),
        (
            "redis.setresp(3); return redis.call('exists', 'h') == 1",
            "#t\r\n",
            ":1\r\n",
        ),
        (
            "redis.setresp(3); return {1, false, 2}",
            "*3\r\n:1\r\n#f\r\n:2\r\n",
            "*3\r\n:1\r\n:0\r\n:2\r\n",
        ),
        (
            "redis.setresp(2); return redis.call('hgetall', 'h')",
            "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
            "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
        ),
        ("redis.setresp(2); return false", "_\r\n", "$-1\r\n"),
    ];
    for (script, want3, want2) in cases {
        exact(&mut r3, &["EVAL", script, "0"], want3);
        exact(&mut r2, &["EVAL", script, "0"], want2);
    }
    // The protocol a script chose does not outlive it.
    exact(
        &mut r3,
        &["EVAL", "return redis.call('hgetall', 'h')", "0"],
        "*2\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    exact(&mut r3, &["HGETALL", "h"], "%1\r\n$1\r\na\r\n$1\r\n1\r\n");
    for r in [&mut r2, &mut r3] {
        eval_fails(r, "redis.setresp(4)", "ERR RESP version must be 2 or 3.", 1);
        eval_fails(
            r,
            "redis.setresp()",
            "ERR redis.setresp() requires one argument.",
            1,
        );
    }
}

#[test]
fn call_raises_and_pcall_returns_the_same_errors() {
    let s = fresh();
    let mut r = s.raw();
    exact(&mut r, &["SET", "s", "str"], "+OK\r\n");
    // (script body after `redis.call`/`redis.pcall`, error text)
    let cases: &[(&str, &str)] = &[
        (
            "('incr', 's')",
            "ERR value is not an integer or out of range",
        ),
        ("('lpush', 's', 'a')", WRONGTYPE),
        ("('nosuch')", "ERR Unknown Redis command called from script"),
        ("(1)", "ERR Unknown Redis command called from script"),
        (
            "('get')",
            "ERR Wrong number of args calling Redis command from script",
        ),
        (
            "('get', 'a', 'b')",
            "ERR Wrong number of args calling Redis command from script",
        ),
        (
            "('set', 'x')",
            "ERR Wrong number of args calling Redis command from script",
        ),
        (
            "()",
            "ERR Please specify at least one argument for this redis lib call",
        ),
        (
            "('get', {})",
            "ERR Lua redis lib command arguments must be strings or integers",
        ),
        (
            "('get', nil)",
            "ERR Lua redis lib command arguments must be strings or integers",
        ),
        (
            "('subscribe', 'x')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('multi')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('exec')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('watch', 'x')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('eval', 'return 1', '0')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('script', 'load', 'return 1')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('function', 'list')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('fcall', 'x', 0)",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('client', 'list')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('hello', '3')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('auth', 'x')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('shutdown')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('config', 'set', 'maxmemory', '0')",
            "ERR This Redis command is not allowed from script",
        ),
        (
            "('blpop', 'nolist', 0)",
            "ERR This Redis command is not allowed from script",
        ),
    ];
    for (call, text) in cases {
        let script = format!("return redis.call{call}");
        eval_fails(&mut r, &script, text, 1);
        let script = format!("return redis.pcall{call}");
        exact(
            &mut r,
            &["EVAL", script.as_str(), "0"],
            format!("-{text}\r\n"),
        );
    }
    // The error table pcall returns, seen from Lua.
    exact_all(
        &mut r,
        &[
            (&["EVAL", "return type(redis.pcall('incr', KEYS[1]))", "1", "s"], "$5\r\ntable\r\n"),
            (&["EVAL", "return redis.pcall('incr', KEYS[1])['err']", "1", "s"], "$43\r\nERR value is not an integer or out of range\r\n"),
            (&["EVAL", "return redis.pcall('lpush', KEYS[1], 'x').err", "1", "s"], &format!("${}\r\n{WRONGTYPE}\r\n", WRONGTYPE.len())),
            // Lua's own pcall catches what redis.call raises: a table.
            (
                &["EVAL", "local ok, e = pcall(redis.call, 'incr', KEYS[1]); return {tostring(ok), e.err}", "1", "s"],
                "*1\r\n$5\r\nfalse\r\n",
            ),
            (
                &["EVAL", "local ok, e = pcall(function() error('x') end); return {tostring(ok), e}", "0"],
                "*2\r\n$5\r\nfalse\r\n$16\r\nuser_script:1: x\r\n",
            ),
            // Errors the script raises itself.
            (&["EVAL", "return redis.error_reply('MY err')", "0"], "-MY err\r\n"),
            (&["EVAL", "return redis.error_reply('noprefix')", "0"], "-ERR noprefix\r\n"),
            (&["EVAL", "return redis.error_reply('-X dash')", "0"], "-X dash\r\n"),
            (&["EVAL", "return redis.error_reply('')", "0"], "-ERR \r\n"),
            (&["EVAL", "return redis.status_reply('HI')", "0"], "+HI\r\n"),
            (&["EVAL", "return redis.status_reply('')", "0"], "+\r\n"),
            (
                &["EVAL", "return 1 +", "0"],
                "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n",
            ),
        ],
    );
    eval_fails(&mut r, "error('boom')", "ERR user_script:1: boom", 1);
    eval_fails(&mut r, "error({err='X boom'})", "X boom", 1);
    eval_fails(&mut r, "\n\nerror('third')", "ERR user_script:3: third", 3);
    eval_fails(
        &mut r,
        "local t = nil; return t.x",
        "ERR user_script:1: attempt to index local 't' (a nil value)",
        1,
    );
    eval_fails(&mut r, "redis.log(99, 'x')", "ERR Invalid debug level.", 1);
    eval_fails(
        &mut r,
        "redis.log(redis.LOG_WARNING)",
        "ERR redis.log() requires two arguments or more.",
        1,
    );
    eval_fails(
        &mut r,
        "return redis.sha1hex()",
        "ERR wrong number of arguments",
        1,
    );
    // The server state is fine afterwards.
    exact(&mut r, &["GET", "s"], "$3\r\nstr\r\n");
}

#[test]
fn lua_pcall_numbers_and_line_breaks_as_redis() {
    let s = fresh();
    let mut r = s.raw();
    exact(&mut r, &["SET", "s", "str"], "+OK\r\n");
    exact_all(
        &mut r,
        &[
            // Lua's own pcall (which Redis wraps) hands over a raised
            // Redis error, or an error table, as its `err` string.
            (
                &["EVAL", "local ok, e = pcall(redis.call, 'incr', KEYS[1]); return {type(e), e}", "1", "s"],
                "*2\r\n$6\r\nstring\r\n$43\r\nERR value is not an integer or out of range\r\n",
            ),
            (
                &["EVAL", "local ok, e = pcall(function() return redis.call('incr', KEYS[1]) end); return e", "1", "s"],
                "$43\r\nERR value is not an integer or out of range\r\n",
            ),
            (&["EVAL", "local ok, e = pcall(function() error({err='X'}) end); return e", "0"], "$1\r\nX\r\n"),
            // redis.pcall's error table carries a second, hidden field.
            (&["EVAL", "return redis.pcall('incr', KEYS[1]).ignore_error_stats_update", "1", "s"], ":1\r\n"),
            (
                &["EVAL", "local n = 0; for _ in pairs(redis.pcall('incr', KEYS[1])) do n = n + 1 end; return n", "1", "s"],
                ":2\r\n",
            ),
            (&["EVAL", "return redis.error_reply('x').ignore_error_stats_update", "0"], "$-1\r\n"),
            // Lua numbers passed to redis.call become %.17g text.
            (&["EVAL", "redis.call('set', KEYS[1], 0.1); return redis.call('get', KEYS[1])", "1", "n"], "$19\r\n0.10000000000000001\r\n"),
            (&["EVAL", "redis.call('set', KEYS[1], 1/3); return redis.call('get', KEYS[1])", "1", "n"], "$19\r\n0.33333333333333331\r\n"),
            (&["EVAL", "redis.call('set', KEYS[1], 2^63); return redis.call('get', KEYS[1])", "1", "n"], "$22\r\n9.2233720368547758e+18\r\n"),
            (&["EVAL", "redis.call('set', KEYS[1], 100); return redis.call('get', KEYS[1])", "1", "n"], "$3\r\n100\r\n"),
            (&["EVAL", "redis.call('set', KEYS[1], -0); return redis.call('get', KEYS[1])", "1", "n"], "$2\r\n-0\r\n"),
            (&["EVAL", "redis.call('set', KEYS[1], 1e20); return redis.call('get', KEYS[1])", "1", "n"], "$5\r\n1e+20\r\n"),
            (&["EVAL", "redis.call('set', KEYS[1], 1/0); return redis.call('get', KEYS[1])", "1", "n"], "$3\r\ninf\r\n"),
            (&["EVAL", "return redis.call('incrbyfloat', KEYS[1], 0.1)", "1", "f"], "$19\r\n0.10000000000000001\r\n"),
            // Doubles as RESP2 bulks, %.17g too.
            (&["EVAL", "return {double=1/3}", "0"], "$19\r\n0.33333333333333331\r\n"),
            (&["EVAL", "return {double=1e300}", "0"], "$23\r\n1.0000000000000001e+300\r\n"),
            (&["EVAL", "return {double=1/0}", "0"], "$3\r\ninf\r\n"),
            (&["EVAL", "return {double=-1/0}", "0"], "$4\r\n-inf\r\n"),
            // CR and LF in status and error replies become spaces.
            (&["EVAL", "return {ok=ARGV[1]}", "0", "a\r\nb\rc\nd"], "+a  b c d\r\n"),
            (&["EVAL", "return {err=ARGV[1]}", "0", "a\r\nb"], "-a  b\r\n"),
            (&["EVAL", "return redis.error_reply(ARGV[1])", "0", "a\r\nb"], "-ERR a  b\r\n"),
            (&["EVAL", "return redis.status_reply(ARGV[1])", "0", "a\r\nb"], "+a  b\r\n"),
            // ... and they end at a NUL byte.
            (&["EVAL", "return {ok=ARGV[1]}", "0", "a\0b"], "+a\r\n"),
            (&["EVAL", "return {err=ARGV[1]}", "0", "a\0b"], "-a\r\n"),
            (&["EVAL", "return redis.error_reply(ARGV[1])", "0", "a\0b"], "-ERR a\r\n"),
            (&["EVAL", "return redis.status_reply(ARGV[1])", "0", "a\0b"], "+a\r\n"),
        ],
    );
    let raise = "error(ARGV[1])";
    exact(
        &mut r,
        &["EVAL", raise, "0", "a\r\nb"],
        format!(
            "-ERR user_script:1: a  b script: {}, on @user_script:1.\r\n",
            sha1_hex(raise.as_bytes())
        ),
    );
    exact(
        &mut r,
        &["EVAL", raise, "0", "a\0b"],
        format!(
            "-ERR user_script:1: a script: {}, on @user_script:1.\r\n",
            sha1_hex(raise.as_bytes())
        ),
    );
}

#[test]
fn globals_are_protected() {
    let s = fresh();
    let mut r = s.raw();
    let readonly = "ERR user_script:1: Attempt to modify a readonly table";
    eval_fails(&mut r, "a = 5", readonly, 1);
    eval_fails(&mut r, "function f() end", readonly, 1);
    eval_fails(&mut r, "redis.call = nil", readonly, 1);
    eval_fails(&mut r, "cjson.encode = nil", readonly, 1);
    eval_fails(&mut r, "string.foo = 1", readonly, 1);
    eval_fails(&mut r, "local t = redis; t.x = 1", readonly, 1);
    // Raised from C: no position prefix.
    eval_fails(
        &mut r,
        "setmetatable(_G, nil)",
        "ERR Attempt to modify a readonly table",
        1,
    );
    eval_fails(
        &mut r,
        "rawset(_G, 'x', 1)",
        "ERR Attempt to modify a readonly table",
        1,
    );
    for name in [
        "a",
        "nonexistent",
        "print",
        "os",
        "io",
        "dofile",
        "require",
        "setfenv",
        "getfenv",
    ] {
        let script = format!("return type({name})");
        let text = format!(
            "ERR user_script:1: Script attempted to access nonexistent global variable '{name}'"
        );
        eval_fails(&mut r, &script, &text, 1);
    }
    eval_fails(
        &mut r,
        "return _G.nonexistent",
        "ERR user_script:1: Script attempted to access nonexistent global variable 'nonexistent'",
        1,
    );
    exact_all(
        &mut r,
        &[
            (
                &["EVAL", "return type(loadstring)", "0"],
                "$8\r\nfunction\r\n",
            ),
            (&["EVAL", "return _VERSION", "0"], "$7\r\nLua 5.1\r\n"),
            (
                &["EVAL", "return redis.REDIS_VERSION", "0"],
                "$6\r\n7.0.15\r\n",
            ),
            (
                &["EVAL", "return redis.REDIS_VERSION_NUM", "0"],
                ":458767\r\n",
            ),
            // Locals are fine.
            (&["EVAL", "local a = 5; return a", "0"], ":5\r\n"),
        ],
    );
}

#[test]
fn keys_and_argv_are_fresh_for_each_call() {
    let s = fresh();
    let mut r = s.raw();
    exact_all(
        &mut r,
        &[
            (
                &["EVAL", "return KEYS", "2", "a", "b", "c", "d"],
                "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            ),
            (
                &["EVAL", "return ARGV", "2", "a", "b", "c", "d"],
                "*2\r\n$1\r\nc\r\n$1\r\nd\r\n",
            ),
            (&["EVAL", "return {KEYS[1], ARGV[1]}", "0"], "*0\r\n"),
            (&["EVAL", "KEYS[5]='x'; return #KEYS", "1", "a"], ":1\r\n"),
            (&["EVAL", "return KEYS[5]", "0"], "$-1\r\n"),
            (
                &["EVAL", "ARGV[1]='changed'; return ARGV[1]", "0", "orig"],
                "$7\r\nchanged\r\n",
            ),
            (&["EVAL", "return ARGV[1]", "0", "orig"], "$4\r\norig\r\n"),
            (&["EVAL", "return ARGV[1]", "0"], "$-1\r\n"),
            (
                &["EVAL", "return #KEYS", "-1"],
                "-ERR Number of keys can't be negative\r\n",
            ),
            (
                &["EVAL", "return #KEYS", "3", "a"],
                "-ERR Number of keys can't be greater than number of args\r\n",
            ),
            (
                &["EVAL", "return #KEYS", "x"],
                "-ERR value is not an integer or out of range\r\n",
            ),
            (
                &["EVAL", "return 1"],
                "-ERR wrong number of arguments for 'eval' command\r\n",
            ),
            (
                &["EVAL"],
                "-ERR wrong number of arguments for 'eval' command\r\n",
            ),
        ],
    );
}

#[test]
fn redis_helpers_sha1hex_replies_and_log() {
    let s = fresh();
    let mut r = s.raw();
    exact_all(
        &mut r,
        &[
            (&["EVAL", "return redis.sha1hex('')", "0"], "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"),
            (&["EVAL", "return redis.sha1hex('abc')", "0"], "$40\r\na9993e364706816aba3e25717850c26c9cd0d89d\r\n"),
            (&["EVAL", "return redis.sha1hex(ARGV[1])", "0", "return 1"], "$40\r\ne0e1f9fabfc9d4800c877a703b823ac0578ff8db\r\n"),
            (&["EVAL", "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}", "0"], "*4\r\n:0\r\n:1\r\n:2\r\n:3\r\n"),
            (&["EVAL", "return redis.log(redis.LOG_WARNING, 'hello from lua', 42)", "0"], "$-1\r\n"),
            (&["EVAL", "return type(redis.error_reply('x'))", "0"], "$5\r\ntable\r\n"),
            (&["EVAL", "return redis.error_reply('x').err", "0"], "$5\r\nERR x\r\n"),
            (&["EVAL", "return redis.status_reply('y').ok", "0"], "$1\r\ny\r\n"),
        ],
    );
    // The log line reaches the server's log (stdout here), arguments joined by spaces.
    wait_for("the redis.log line", 5, || {
        s.log().contains("hello from lua 42").then_some(())
    });
}

#[test]
fn select_inside_a_script_does_not_leak_to_the_caller() {
    let s = fresh();
    let mut r = s.raw();
    exact_all(
        &mut r,
        &[
            (&["SET", "sk", "outer"], "+OK\r\n"),
            (
                &["EVAL", "redis.call('select', 5); redis.call('set', 'sk', 'in5'); return redis.call('get', 'sk')", "0"],
                "$3\r\nin5\r\n",
            ),
            (&["GET", "sk"], "$5\r\nouter\r\n"),
            (&["EVAL", "return redis.call('get', 'sk')", "0"], "$5\r\nouter\r\n"),
            (&["SELECT", "5"], "+OK\r\n"),
            (&["GET", "sk"], "$3\r\nin5\r\n"),
            // A script starts in its caller's database.
            (&["EVAL", "return redis.call('get', 'sk')", "0"], "$3\r\nin5\r\n"),
            (
                &["EVAL", "return redis.pcall('select', 99)", "0"],
                "-ERR DB index is out of range\r\n",
            ),
            (&["GET", "sk"], "$3\r\nin5\r\n"),
        ],
    );
}

#[test]
fn evalsha_and_the_script_cache() {
    let s = fresh();
    let mut r = s.raw();
    let one = sha1_hex(b"return 1");
    let noscript = "-NOSCRIPT No matching script. Please use EVAL.\r\n";
    exact(&mut r, &["EVALSHA", one.as_str(), "0"], noscript);
    exact(&mut r, &["EVALSHA", "abc", "0"], noscript);
    exact(&mut r, &["EVALSHA_RO", one.as_str(), "0"], noscript);
    exact(
        &mut r,
        &["SCRIPT", "LOAD", "return 1"],
        format!("$40\r\n{one}\r\n"),
    );
    exact(&mut r, &["EVALSHA", one.as_str(), "0"], ":1\r\n");
    // Digests are case-insensitive.
    exact(
        &mut r,
        &["EVALSHA", one.to_uppercase().as_str(), "0"],
        ":1\r\n",
    );
    exact(
        &mut r,
        &[
            "SCRIPT",
            "EXISTS",
            one.as_str(),
            "ffffffffffffffffffffffffffffffffffffffff",
            one.to_uppercase().as_str(),
        ],
        "*3\r\n:1\r\n:0\r\n:1\r\n",
    );
    // EVAL caches what it ran.
    let two = "return KEYS[1] .. ARGV[1]";
    exact(&mut r, &["EVAL", two, "1", "a", "b"], "$2\r\nab\r\n");
    let two_sha = sha1_hex(two.as_bytes());
    exact(
        &mut r,
        &["EVALSHA", two_sha.as_str(), "1", "x", "y"],
        "$2\r\nxy\r\n",
    );
    // A script that does not compile is not cached.
    exact(
        &mut r,
        &["SCRIPT", "LOAD", "return +"],
        "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'\r\n",
    );
    let bad = sha1_hex(b"return +");
    exact(&mut r, &["SCRIPT", "EXISTS", bad.as_str()], "*1\r\n:0\r\n");
    exact_all(
        &mut r,
        &[
            (
                &["SCRIPT", "FLUSH", "FOO"],
                "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n",
            ),
            (&["SCRIPT", "FLUSH"], "+OK\r\n"),
            (&["SCRIPT", "FLUSH", "ASYNC"], "+OK\r\n"),
            (&["SCRIPT", "FLUSH", "sync"], "+OK\r\n"),
            (
                &["SCRIPT", "EXISTS"],
                "-ERR wrong number of arguments for 'script|exists' command\r\n",
            ),
            (
                &["SCRIPT", "LOAD"],
                "-ERR wrong number of arguments for 'script|load' command\r\n",
            ),
            (
                &["SCRIPT", "FOO"],
                "-ERR unknown subcommand 'FOO'. Try SCRIPT HELP.\r\n",
            ),
            (
                &["SCRIPT", "KILL"],
                "-NOTBUSY No scripts in execution right now.\r\n",
            ),
            (
                &["EVALSHA"],
                "-ERR wrong number of arguments for 'evalsha' command\r\n",
            ),
        ],
    );
    exact(&mut r, &["EVALSHA", one.as_str(), "0"], noscript);
    exact(
        &mut r,
        &["SCRIPT", "EXISTS", one.as_str(), two_sha.as_str()],
        "*2\r\n:0\r\n:0\r\n",
    );
    // An error in a cached script names the script's SHA, run either way.
    let failing = "return redis.call('nosuch')";
    exact(
        &mut r,
        &["SCRIPT", "LOAD", failing],
        format!("$40\r\n{}\r\n", sha1_hex(failing.as_bytes())),
    );
    let expected = script_err("ERR Unknown Redis command called from script", failing, 1);
    exact(
        &mut r,
        &["EVALSHA", sha1_hex(failing.as_bytes()).as_str(), "0"],
        &expected,
    );
    exact(&mut r, &["EVAL", failing, "0"], &expected);
    let help = r.cmd(&["SCRIPT", "HELP"]);
    assert_eq!(
        help,
        bulks(&[
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Prints this help.",
        ])
        .to_simple_lines(),
        "SCRIPT HELP"
    );
}

/// SCRIPT HELP and FUNCTION HELP lines are status replies.
trait SimpleLines {
    fn to_simple_lines(self) -> Frame;
}

impl SimpleLines for Frame {
    fn to_simple_lines(self) -> Frame {
        match self {
            Frame::Array(v) => Frame::Array(
                v.into_iter()
                    .map(|f| match f {
                        Frame::Bulk(b) => Frame::Simple(b),
                        other => other,
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

#[test]
fn eval_ro_and_shebang_flags() {
    let s = fresh();
    let mut r = s.raw();
    let ro_err = "ERR Write commands are not allowed from read-only scripts.";
    let set = "return redis.call('set', 'k', 'v')";
    exact(&mut r, &["EVAL_RO", set, "0"], script_err(ro_err, set, 1));
    exact(
        &mut r,
        &["EVAL_RO", "return redis.pcall('set', 'k', 'v')", "0"],
        format!("-{ro_err}\r\n"),
    );
    exact(
        &mut r,
        &["EVAL_RO", "return redis.call('get', 'k')", "0"],
        "$-1\r\n",
    );
    exact(
        &mut r,
        &["SCRIPT", "LOAD", set],
        format!("$40\r\n{}\r\n", sha1_hex(set.as_bytes())),
    );
    exact(
        &mut r,
        &["EVALSHA_RO", sha1_hex(set.as_bytes()).as_str(), "0"],
        script_err(ro_err, set, 1),
    );
    exact(&mut r, &["EXISTS", "k"], ":0\r\n");
    // no-writes: the error comes from line 2, after the shebang line.
    let nw = "#!lua flags=no-writes\nreturn redis.call('set','k','v')";
    exact(&mut r, &["EVAL", nw, "0"], script_err(ro_err, nw, 2));
    exact_all(
        &mut r,
        &[
            (
                &[
                    "EVAL",
                    "#!lua flags=no-writes\nreturn redis.pcall('set','k','v')",
                    "0",
                ],
                &format!("-{ro_err}\r\n"),
            ),
            (
                &[
                    "EVAL",
                    "#!lua flags=no-writes\nreturn redis.call('get','k')",
                    "0",
                ],
                "$-1\r\n",
            ),
            (
                &["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"],
                ":1\r\n",
            ),
            (
                &["EVAL", "#!lua flags=no-writes,allow-stale\nreturn 1", "0"],
                ":1\r\n",
            ),
            (
                &[
                    "EVAL",
                    "#!lua flags=allow-cross-slot-keys,no-cluster,allow-oom\nreturn 1",
                    "0",
                ],
                ":1\r\n",
            ),
            (&["EVAL", "#!lua flags=\nreturn 1", "0"], ":1\r\n"),
            (&["EVAL", "#!lua\nreturn 1", "0"], ":1\r\n"),
            (&["EVAL", "#!lua \nreturn 1", "0"], ":1\r\n"),
            (
                &["EVAL", "#!lua flags=foo\nreturn 1", "0"],
                "-ERR Unexpected flag in script shebang: foo\r\n",
            ),
            (
                &["EVAL", "#!lua name=x\nreturn 1", "0"],
                "-ERR Unknown lua shebang option: name=x\r\n",
            ),
            (
                &["EVAL", "#!python\nreturn 1", "0"],
                "-ERR Unexpected engine in script shebang: #!python\r\n",
            ),
            (&["EVAL", "#!lua flags=no-writes\nreturn 1", "0"], ":1\r\n"),
            (
                &["EVAL", "#!lua\nreturn redis.call('get', KEYS[1])", "1", "a"],
                "$-1\r\n",
            ),
            // A shebang without no-writes declares a script that may write:
            // the _RO commands refuse it before it runs.
            (
                &["EVAL_RO", "#!lua\nreturn 1", "0"],
                "-ERR Can not execute a script with write flag using *_ro command.\r\n",
            ),
            (
                &["EVAL_RO", "#!lua flags=allow-oom\nreturn 1", "0"],
                "-ERR Can not execute a script with write flag using *_ro command.\r\n",
            ),
        ],
    );
    eval_fails(&mut r, "#!lua\nerror('x')", "ERR user_script:2: x", 2);
    // Out of memory: a script without a shebang runs and only its writes
    // fail; `#!lua` (without allow-oom or no-writes) is refused up front.
    exact(&mut r, &["CONFIG", "SET", "maxmemory", "1"], "+OK\r\n");
    let oom = "OOM command not allowed when used memory > 'maxmemory'.";
    let oom_set = "return redis.call('set','k','v')";
    exact_all(
        &mut r,
        &[
            (&["EVAL", "return redis.call('get','k')", "0"], "$-1\r\n"),
            (
                &["EVAL", "return redis.pcall('set','k','v')", "0"],
                &format!("-{oom}\r\n"),
            ),
            (
                &["EVAL", "#!lua\nreturn redis.call('get','k')", "0"],
                &format!("-{oom}\r\n"),
            ),
            (
                &[
                    "EVAL",
                    "#!lua flags=no-writes\nreturn redis.call('get','k')",
                    "0",
                ],
                "$-1\r\n",
            ),
            (
                &[
                    "EVAL",
                    "#!lua flags=allow-oom\nreturn redis.call('set','k','v')",
                    "0",
                ],
                "+OK\r\n",
            ),
            (&["EVAL", "return 1", "0"], ":1\r\n"),
        ],
    );
    exact(&mut r, &["EVAL", oom_set, "0"], script_err(oom, oom_set, 1));
    exact(&mut r, &["CONFIG", "SET", "maxmemory", "0"], "+OK\r\n");
    exact(&mut r, &["GET", "k"], "$1\r\nv\r\n");
}

#[test]
fn scripts_inside_multi_exec() {
    let s = fresh();
    let mut r = s.raw();
    exact(&mut r, &["MULTI"], "+OK\r\n");
    let queued: &[&[&str]] = &[
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "mc"],
        &["EVAL", "return redis.call('incr', KEYS[1])", "1", "mc"],
        &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
        &["EVAL", "return 1 +", "0"],
        &["EVAL", "error('x')", "0"],
        &["EVAL", "return {ok='inside'}", "0"],
    ];
    for q in queued {
        exact(&mut r, q, "+QUEUED\r\n");
    }
    exact(
        &mut r,
        &["EXEC"],
        format!(
            "*6\r\n:1\r\n:2\r\n-NOSCRIPT No matching script. Please use EVAL.\r\n-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n{}+inside\r\n",
            script_err("ERR user_script:1: x", "error('x')", 1)
        ),
    );
    // A wrong arity is refused at queue time and aborts the EXEC.
    exact(&mut r, &["MULTI"], "+OK\r\n");
    exact(
        &mut r,
        &["EVAL", "return 1"],
        "-ERR wrong number of arguments for 'eval' command\r\n",
    );
    exact(
        &mut r,
        &["EXEC"],
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    exact(&mut r, &["GET", "mc"], "$1\r\n2\r\n");
}

#[test]
fn math_random_is_deterministic_from_startup() {
    // Redis 7.0 seeds the scripts' PRNG once, at startup, and never again
    // (neither per script nor by SCRIPT FLUSH): a fresh server always draws
    // the same sequence.
    let s = fresh();
    let mut r = s.raw();
    exact_all(
        &mut r,
        &[
            (
                &["EVAL", "return {math.random(100), math.random(100)}", "0"],
                "*2\r\n:40\r\n:85\r\n",
            ),
            (
                &["EVAL", "return {math.random(100), math.random(100)}", "0"],
                "*2\r\n:36\r\n:45\r\n",
            ),
            (&["SCRIPT", "FLUSH"], "+OK\r\n"),
            (
                &[
                    "EVAL",
                    "return {math.random(100), tostring(math.random())}",
                    "0",
                ],
                "*2\r\n:32\r\n$16\r\n0.88642843341754\r\n",
            ),
            (
                &[
                    "EVAL",
                    "math.randomseed(7); return {math.random(1000), math.random(1000)}",
                    "0",
                ],
                "*2\r\n:267\r\n:683\r\n",
            ),
            (
                &[
                    "EVAL",
                    "math.randomseed(7); return {math.random(1000), math.random(1000)}",
                    "0",
                ],
                "*2\r\n:267\r\n:683\r\n",
            ),
        ],
    );
}

#[test]
fn bundled_libraries_work() {
    let s = fresh();
    let mut r = s.raw();
    exact_all(
        &mut r,
        &[
            (&["EVAL", "return bit.band(0xff, 0x0f)", "0"], ":15\r\n"),
            (&["EVAL", "return bit.tohex(65535)", "0"], "$8\r\n0000ffff\r\n"),
            (
                &["EVAL", "return {bit.bor(1,2,4), bit.bxor(5,3), bit.lshift(1,10), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.bnot(0)}", "0"],
                "*6\r\n:7\r\n:6\r\n:1024\r\n:15\r\n:-16\r\n:-1\r\n",
            ),
            (&["EVAL", "return struct.pack('>I2', 258)", "0"], "$2\r\n\x01\x02\r\n"),
            (&["EVAL", "return {struct.unpack('>I2', 'AB')}", "0"], "*2\r\n:16706\r\n:3\r\n"),
            (&["EVAL", "return struct.size('i4i8')", "0"], ":12\r\n"),
            (&["EVAL", "return cjson.encode({1,2,'x'})", "0"], "$9\r\n[1,2,\"x\"]\r\n"),
            (&["EVAL", "return cjson.encode({a=1})", "0"], "$7\r\n{\"a\":1}\r\n"),
            (
                &["EVAL", "local t = cjson.decode('{\"a\":[1,2,{\"b\":null}]}'); return {t.a[1], t.a[2], type(t.a[3].b)}", "0"],
                "*3\r\n:1\r\n:2\r\n$8\r\nuserdata\r\n",
            ),
            (&["EVAL", "return cjson.decode('[1,2,3]')", "0"], "*3\r\n:1\r\n:2\r\n:3\r\n"),
            (&["EVAL", "return cjson.encode(cjson.decode('{\"x\":1.5}'))", "0"], "$9\r\n{\"x\":1.5}\r\n"),
            (
                &["EVAL", "return cmsgpack.unpack(cmsgpack.pack({1,'two',{3}}))", "0"],
                "*3\r\n:1\r\n$3\r\ntwo\r\n*1\r\n:3\r\n",
            ),
            (&["EVAL", "return {cmsgpack.unpack(cmsgpack.pack(1,2,3))}", "0"], "*3\r\n:1\r\n:2\r\n:3\r\n"),
        ],
    );
    exact(
        &mut r,
        &["EVAL", "return cmsgpack.pack({1,2,3})", "0"],
        b"$4\r\n\x93\x01\x02\x03\r\n",
    );
}

// ---------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------

/// A library of three functions: `f1` (no flags, echoes KEYS[1] and
/// ARGV[1]), `f2` (allow-oom, described, SETs) and `ro` (no-writes, GETs).
const LIB1: &str = "#!lua name=lib1\n\
redis.register_function('f1', function(keys, args) return {keys[1], args[1]} end)\n\
redis.register_function{function_name='f2', callback=function(keys, args) return redis.call('set', keys[1], args[1]) end, flags={'allow-oom'}, description='sets'}\n\
redis.register_function{function_name='ro', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}}";

#[test]
fn function_load_errors() {
    let s = fresh();
    let mut r = s.raw();
    exact(&mut r, &["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n");
    let cases: &[(&str, &str)] = &[
        ("return 1", "-ERR Missing library metadata\r\n"),
        ("#!python name=x\nreturn 1", "-ERR Engine 'python' not found\r\n"),
        ("#!lua\nreturn 1", "-ERR Library name was not given\r\n"),
        ("#!lua name=lib2\nreturn 1", "-ERR No functions registered\r\n"),
        ("#!lua name=lib2 foo=bar\nreturn 1", "-ERR Invalid metadata value given: foo=bar\r\n"),
        ("#!lua name=bad-name!\nreturn 1", "-ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long\r\n"),
        ("#!lua name=lib1\nredis.register_function('x1', function() return 1 end)", "-ERR Library 'lib1' already exists\r\n"),
        ("#!lua name=lib2\nredis.register_function('f1', function() return 1 end)", "-ERR Function f1 already exists\r\n"),
        (
            "#!lua name=lib2\nredis.register_function('bad name', function() return 1 end)",
            "-ERR Error registering functions: ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long\r\n",
        ),
        (
            "#!lua name=lib2\nredis.register_function{function_name='g', callback=function() return 1 end, flags={'bogus'}}",
            "-ERR Error registering functions: ERR unknown flag given\r\n",
        ),
        (
            "#!lua name=lib2\nredis.register_function('g', function() return 1 end)\nredis.register_function('g', function() return 1 end)",
            "-ERR Error registering functions: ERR Function already exists in the library\r\n",
        ),
        (
            "#!lua name=lib2\nredis.register_function('g', 'notafunction')",
            "-ERR Error registering functions: ERR second argument to redis.register_function must be a function\r\n",
        ),
        // At load time only the registration API exists.
        (
            "#!lua name=lib2\nredis.call('ping')",
            "-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'\r\n",
        ),
        (
            "#!lua name=lib2\nerror('boom at load')",
            "-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'error'\r\n",
        ),
        ("#!lua name=lib2\nreturn +", "-ERR Error compiling function: user_function:2: unexpected symbol near '+'\r\n"),
    ];
    for (code, expected) in cases {
        exact(&mut r, &["FUNCTION", "LOAD", code], expected);
    }
    exact_all(
        &mut r,
        &[
            (
                &[
                    "FUNCTION",
                    "LOAD",
                    "FOO",
                    "#!lua name=lib3\nredis.register_function('h', function() return 1 end)",
                ],
                "-ERR Unknown option given: FOO\r\n",
            ),
            (
                &["FUNCTION", "LOAD"],
                "-ERR wrong number of arguments for 'function|load' command\r\n",
            ),
            // More arguments than the code: the code is an unknown option
            // (its line breaks shown as spaces).
            (
                &["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f', function() return 1 end)", "extra"],
                "-ERR Unknown option given: #!lua name=x redis.register_function('f', function() return 1 end)\r\n",
            ),
            (
                &["FUNCTION", "LOAD", "REPLACE", "#!lua name=x\nredis.register_function('f', function() return 1 end)", "extra"],
                "-ERR Unknown option given: #!lua name=x redis.register_function('f', function() return 1 end)\r\n",
            ),
            (
                &["FUNCTION", "FOO"],
                "-ERR unknown subcommand 'FOO'. Try FUNCTION HELP.\r\n",
            ),
            (
                &["FUNCTION", "KILL"],
                "-NOTBUSY No scripts in execution right now.\r\n",
            ),
        ],
    );
    // Nothing of the failed loads stayed behind.
    let list = r.cmd(&["FUNCTION", "LIST"]);
    let Frame::Array(libs) = list else {
        panic!("FUNCTION LIST: {list:?}")
    };
    assert_eq!(libs.len(), 1, "{libs:?}");
    let help = r.cmd(&["FUNCTION", "HELP"]);
    let Frame::Array(lines) = help else {
        panic!("FUNCTION HELP: {help:?}")
    };
    assert_eq!(lines.len(), 40, "{lines:?}");
    assert_eq!(
        lines[0],
        Frame::Simple(
            b"FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".to_vec()
        )
    );
    assert_eq!(
        lines[1],
        Frame::Simple(b"LOAD [REPLACE] <FUNCTION CODE>".to_vec())
    );
}

#[test]
fn fcall_and_function_flags() {
    let s = fresh();
    let mut r = s.raw();
    exact(&mut r, &["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n");
    let ro_flag = "-ERR Can not execute a script with write flag using *_ro command.\r\n";
    exact_all(
        &mut r,
        &[
            (
                &["FCALL", "f1", "1", "k1", "a1"],
                "*2\r\n$2\r\nk1\r\n$2\r\na1\r\n",
            ),
            (&["FCALL", "f1", "0"], "*0\r\n"),
            (&["FCALL", "f2", "1", "k1", "v1"], "+OK\r\n"),
            (&["FCALL", "ro", "1", "k1"], "$2\r\nv1\r\n"),
            (&["FCALL_RO", "ro", "1", "k1"], "$2\r\nv1\r\n"),
            (&["FCALL_RO", "f2", "1", "k1", "v1"], ro_flag),
            (&["FCALL_RO", "f1", "1", "k1", "a1"], ro_flag),
            (&["FCALL", "nosuch", "0"], "-ERR Function not found\r\n"),
            (&["FCALL_RO", "nosuch", "0"], "-ERR Function not found\r\n"),
            (
                &["FCALL", "f1", "5", "k"],
                "-ERR Number of keys can't be greater than number of args\r\n",
            ),
            (
                &["FCALL", "f1", "-1"],
                "-ERR Number of keys can't be negative\r\n",
            ),
            (
                &["FCALL", "f1"],
                "-ERR wrong number of arguments for 'fcall' command\r\n",
            ),
        ],
    );
    // Errors inside a function name the function instead of a SHA.
    let lib = "#!lua name=L\n\
redis.register_function('boom', function(keys, args) return redis.call('incr', keys[1]) end)\n\
redis.register_function('glob', function() x = 1 end)\n\
redis.register_function('er', function() error('bad') end)\n\
redis.register_function{function_name='nw', callback=function(keys) return redis.call('set', keys[1], 'x') end, flags={'no-writes'}}\n\
redis.register_function('pc', function(keys) return redis.pcall('incr', keys[1]) end)\n\
redis.register_function('r3', function(keys) redis.setresp(3); return redis.call('hgetall', keys[1]) end)";
    exact(&mut r, &["FUNCTION", "LOAD", lib], "$1\r\nL\r\n");
    exact_all(
        &mut r,
        &[
            (&["SET", "s", "str"], "+OK\r\n"),
            (&["HSET", "h", "a", "1"], ":1\r\n"),
            (&["FCALL", "boom", "1", "s"], "-ERR value is not an integer or out of range script: boom, on @user_function:2.\r\n"),
            (&["FCALL", "glob", "0"], "-ERR user_function:3: Attempt to modify a readonly table script: glob, on @user_function:3.\r\n"),
            (&["FCALL", "er", "0"], "-ERR user_function:4: bad script: er, on @user_function:4.\r\n"),
            (&["FCALL", "nw", "1", "k"], "-ERR Write commands are not allowed from read-only scripts. script: nw, on @user_function:5.\r\n"),
            (&["FCALL", "pc", "1", "s"], "-ERR value is not an integer or out of range\r\n"),
            (&["FCALL", "r3", "1", "h"], "*2\r\n$1\r\na\r\n$1\r\n1\r\n"),
        ],
    );
    let mut r3 = resp3(&s);
    exact(
        &mut r3,
        &["FCALL", "r3", "1", "h"],
        "%1\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    // LOAD REPLACE swaps the whole library: its other functions are gone.
    exact(
        &mut r,
        &["FUNCTION", "LOAD", "REPLACE", "#!lua name=L\nredis.register_function('boom', function(keys, args) return 'replaced' end)"],
        "$1\r\nL\r\n",
    );
    exact(&mut r, &["FCALL", "boom", "1", "s"], "$8\r\nreplaced\r\n");
    exact(
        &mut r,
        &["FCALL", "glob", "0"],
        "-ERR Function not found\r\n",
    );
    // Under maxmemory only allow-oom and no-writes functions run.
    exact(&mut r, &["CONFIG", "SET", "maxmemory", "1"], "+OK\r\n");
    exact(
        &mut r,
        &["FCALL", "f1", "0"],
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n",
    );
    exact(&mut r, &["FCALL", "ro", "1", "k1"], "$2\r\nv1\r\n");
    exact(&mut r, &["FCALL", "f2", "1", "k1", "v2"], "+OK\r\n");
    exact(&mut r, &["CONFIG", "SET", "maxmemory", "0"], "+OK\r\n");
    // Functions run inside MULTI too.
    exact(&mut r, &["MULTI"], "+OK\r\n");
    exact(&mut r, &["FCALL", "ro", "1", "k1"], "+QUEUED\r\n");
    exact(&mut r, &["FCALL", "nosuch", "0"], "+QUEUED\r\n");
    exact(
        &mut r,
        &["EXEC"],
        "*2\r\n$2\r\nv2\r\n-ERR Function not found\r\n",
    );
}

/// One library of a FUNCTION LIST reply as (name, engine, sorted
/// functions as (name, description, flags), code).
type Library = (Frame, Frame, Vec<(Frame, Frame, Vec<Frame>)>, Option<Frame>);

/// Parses FUNCTION LIST (RESP2 arrays or RESP3 maps), asserting its shape;
/// libraries and functions come sorted (Redis lists them in hash order).
fn parse_list(reply: Frame) -> Vec<Library> {
    fn pairs(f: Frame) -> Vec<(Frame, Frame)> {
        match f {
            Frame::Map(m) => m,
            Frame::Array(v) => {
                assert!(v.len() % 2 == 0, "odd field list {v:?}");
                let mut out = Vec::new();
                let mut it = v.into_iter();
                while let (Some(k), Some(x)) = (it.next(), it.next()) {
                    out.push((k, x));
                }
                out
            }
            other => panic!("not a map: {other:?}"),
        }
    }
    fn items(f: Frame) -> Vec<Frame> {
        match f {
            Frame::Array(v) | Frame::Set(v) => v,
            other => panic!("not a list: {other:?}"),
        }
    }
    let mut libs: Vec<Library> = items(reply)
        .into_iter()
        .map(|lib| {
            let fields = pairs(lib);
            let names: Vec<&Frame> = fields.iter().map(|(k, _)| k).collect();
            let mut expected = vec![bulk("library_name"), bulk("engine"), bulk("functions")];
            if fields.len() == 4 {
                expected.push(bulk("library_code"));
            }
            assert_eq!(names, expected.iter().collect::<Vec<_>>(), "library fields");
            let mut it = fields.into_iter().map(|(_, v)| v);
            let name = it.next().unwrap();
            let engine = it.next().unwrap();
            let mut funcs: Vec<(Frame, Frame, Vec<Frame>)> = items(it.next().unwrap())
                .into_iter()
                .map(|f| {
                    let fields = pairs(f);
                    let names: Vec<Frame> = fields.iter().map(|(k, _)| k.clone()).collect();
                    assert_eq!(
                        names,
                        vec![bulk("name"), bulk("description"), bulk("flags")]
                    );
                    let mut it = fields.into_iter().map(|(_, v)| v);
                    let n = it.next().unwrap();
                    let d = it.next().unwrap();
                    let mut flags = items(it.next().unwrap());
                    flags.sort_by_key(|f| f.as_bytes().map(<[u8]>::to_vec));
                    (n, d, flags)
                })
                .collect();
            funcs.sort_by_key(|f| f.0.as_bytes().map(<[u8]>::to_vec));
            (name, engine, funcs, it.next())
        })
        .collect();
    libs.sort_by_key(|l| l.0.as_bytes().map(<[u8]>::to_vec));
    libs
}

fn status(s: &str) -> Frame {
    Frame::Simple(s.as_bytes().to_vec())
}

fn lib1_functions() -> Vec<(Frame, Frame, Vec<Frame>)> {
    vec![
        (bulk("f1"), nil(), vec![]),
        (bulk("f2"), bulk("sets"), vec![status("allow-oom")]),
        (bulk("ro"), nil(), vec![status("no-writes")]),
    ]
}

#[test]
fn function_list_shape() {
    let s = fresh();
    let mut r = s.raw();
    exact(&mut r, &["FUNCTION", "LIST"], "*0\r\n");
    exact(&mut r, &["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n");
    let lib2 = "#!lua name=other\nredis.register_function{function_name='o', callback=function() return 1 end, flags={'no-writes', 'allow-stale', 'no-cluster', 'allow-cross-slot-keys', 'allow-oom'}}";
    exact(&mut r, &["FUNCTION", "LOAD", lib2], "$5\r\nother\r\n");
    let other = (
        bulk("other"),
        bulk("LUA"),
        vec![(
            bulk("o"),
            nil(),
            vec![
                status("allow-cross-slot-keys"),
                status("allow-oom"),
                status("allow-stale"),
                status("no-cluster"),
                status("no-writes"),
            ],
        )],
        None,
    );
    let lib1 = (bulk("lib1"), bulk("LUA"), lib1_functions(), None);
    assert_eq!(
        parse_list(r.cmd(&["FUNCTION", "LIST"])),
        vec![lib1.clone(), other.clone()]
    );
    // LIBRARYNAME is a glob pattern over library names.
    assert_eq!(
        parse_list(r.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "lib"])),
        vec![]
    );
    assert_eq!(
        parse_list(r.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "lib*"])),
        vec![lib1.clone()]
    );
    assert_eq!(
        parse_list(r.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "*th*"])),
        vec![other.clone()]
    );
    let with_code = (
        bulk("lib1"),
        bulk("LUA"),
        lib1_functions(),
        Some(bulk(LIB1)),
    );
    assert_eq!(
        parse_list(r.cmd(&["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "lib1"])),
        vec![with_code.clone()]
    );
    assert_eq!(
        parse_list(r.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "lib1", "WITHCODE"])),
        vec![with_code]
    );
    // RESP3: maps, flags as a set, a missing description as null.
    let mut r3 = resp3(&s);
    let reply = r3.cmd(&["FUNCTION", "LIST", "LIBRARYNAME", "lib1"]);
    let Frame::Array(libs) = &reply else {
        panic!("{reply:?}")
    };
    assert!(matches!(&libs[0], Frame::Map(_)), "{reply:?}");
    assert_eq!(parse_list(reply), vec![lib1]);
    exact(
        &mut r3,
        &["FUNCTION", "LIST", "LIBRARYNAME", "other"],
        "*1\r\n%3\r\n$12\r\nlibrary_name\r\n$5\r\nother\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*1\r\n%3\r\n$4\r\nname\r\n$1\r\no\r\n$11\r\ndescription\r\n_\r\n$5\r\nflags\r\n~5\r\n+no-writes\r\n+allow-oom\r\n+allow-stale\r\n+no-cluster\r\n+allow-cross-slot-keys\r\n",
    );
    exact_all(
        &mut r,
        &[
            (
                &["FUNCTION", "LIST", "FOO"],
                "-ERR Unknown argument FOO\r\n",
            ),
            (
                &["FUNCTION", "LIST", "LIBRARYNAME"],
                "-ERR library name argument was not given\r\n",
            ),
        ],
    );
}

#[test]
fn function_delete_and_flush() {
    let s = fresh();
    let mut r = s.raw();
    exact(&mut r, &["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n");
    exact_all(
        &mut r,
        &[
            (
                &["FUNCTION", "DELETE", "nosuch"],
                "-ERR Library not found\r\n",
            ),
            (
                &["FUNCTION", "DELETE"],
                "-ERR wrong number of arguments for 'function|delete' command\r\n",
            ),
            (&["FUNCTION", "DELETE", "lib1"], "+OK\r\n"),
            (
                &["FUNCTION", "DELETE", "lib1"],
                "-ERR Library not found\r\n",
            ),
            (&["FCALL", "f1", "0"], "-ERR Function not found\r\n"),
            // Its function names are free again.
            (&["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n"),
            (
                &["FUNCTION", "FLUSH", "FOO"],
                "-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n",
            ),
            (&["FUNCTION", "FLUSH"], "+OK\r\n"),
            (&["FUNCTION", "LIST"], "*0\r\n"),
            (&["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n"),
            (&["FUNCTION", "FLUSH", "ASYNC"], "+OK\r\n"),
            (&["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n"),
            (&["FUNCTION", "FLUSH", "SYNC"], "+OK\r\n"),
            (&["FCALL", "ro", "1", "k"], "-ERR Function not found\r\n"),
            // FLUSHALL leaves the functions alone, and SCRIPT FLUSH too.
            (&["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n"),
            (&["FLUSHALL"], "+OK\r\n"),
            (&["SCRIPT", "FLUSH"], "+OK\r\n"),
            (
                &["FCALL", "f1", "1", "a", "b"],
                "*2\r\n$1\r\na\r\n$1\r\nb\r\n",
            ),
        ],
    );
}

/// `FUNCTION DUMP` of an empty library set on Redis 7.0: RDB version 10
/// and the CRC64 of it.
const EMPTY_DUMP: &[u8] = b"\x0a\x00\x5d\x9b\x5c\x40\x0f\x7f\xa2\xda";

/// What Redis 7.0.15 (rdbcompression yes) dumps for [`MYLIB`].
const MYLIB_DUMP_HEX: &str = "f5c34056405b1f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f0b66756e6374696f6e28276d79400b02272c2040066012116b6579732c2061726773292072657475726e600c075b315d20656e64290a008d5936adc6e707da";

const MYLIB: &str =
    "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return args[1] end)";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn dump(r: &mut Raw) -> Vec<u8> {
    match r.cmd(&["FUNCTION", "DUMP"]) {
        Frame::Bulk(b) => b,
        other => panic!("FUNCTION DUMP: {other:?}"),
    }
}

fn restore(r: &mut Raw, payload: &[u8], policy: Option<&str>) -> Frame {
    let mut args: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", payload];
    if let Some(p) = policy {
        args.push(p.as_bytes());
    }
    r.cmd(&args)
}

fn names(r: &mut Raw) -> Vec<Frame> {
    parse_list(r.cmd(&["FUNCTION", "LIST"]))
        .into_iter()
        .map(|l| l.0)
        .collect()
}

#[test]
fn function_dump_and_restore() {
    let s = fresh();
    let mut r = s.raw();
    assert_eq!(dump(&mut r), EMPTY_DUMP);
    exact(&mut r, &["FUNCTION", "LOAD", MYLIB], "$5\r\nmylib\r\n");
    exact(&mut r, &["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n");
    let both = dump(&mut r);
    // APPEND (the default) aborts on a library that exists (whichever of
    // the two Redis meets first: it walks a hash table).
    let exists = [
        err("ERR Library mylib already exists"),
        err("ERR Library lib1 already exists"),
    ];
    let got = restore(&mut r, &both, None);
    assert!(exists.contains(&got), "{got:?}");
    let got = restore(&mut r, &both, Some("APPEND"));
    assert!(exists.contains(&got), "{got:?}");
    assert_eq!(restore(&mut r, &both, Some("REPLACE")), ok());
    assert_eq!(restore(&mut r, &both, Some("FLUSH")), ok());
    assert_eq!(names(&mut r), vec![bulk("lib1"), bulk("mylib")]);
    exact(&mut r, &["FCALL", "myfunc", "0", "x"], "$1\r\nx\r\n");
    // FLUSH drops what is not in the payload.
    exact(&mut r, &["FUNCTION", "FLUSH"], "+OK\r\n");
    let redis_payload = unhex(MYLIB_DUMP_HEX);
    // A payload Redis 7.0.15 made restores here as it does there.
    assert_eq!(restore(&mut r, &redis_payload, None), ok());
    assert_eq!(names(&mut r), vec![bulk("mylib")]);
    exact(&mut r, &["FCALL", "myfunc", "0", "hi"], "$2\r\nhi\r\n");
    exact(
        &mut r,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=third\nredis.register_function('t3', function() return 3 end)",
        ],
        "$5\r\nthird\r\n",
    );
    assert_eq!(restore(&mut r, &both, Some("FLUSH")), ok());
    assert_eq!(names(&mut r), vec![bulk("lib1"), bulk("mylib")]);
    exact(&mut r, &["FCALL", "t3", "0"], "-ERR Function not found\r\n");
    // A function of another library with the same name: refused by APPEND
    // and by REPLACE (which replaces libraries, not functions).
    exact(&mut r, &["FUNCTION", "FLUSH"], "+OK\r\n");
    exact(
        &mut r,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=other\nredis.register_function('myfunc', function() return 'other' end)",
        ],
        "$5\r\nother\r\n",
    );
    let fexists = err("ERR Function myfunc already exists");
    assert_eq!(restore(&mut r, &redis_payload, None), fexists);
    assert_eq!(restore(&mut r, &redis_payload, Some("REPLACE")), fexists);
    exact(&mut r, &["FCALL", "myfunc", "0"], "$5\r\nother\r\n");
    // REPLACE swaps a same-named library whole.
    exact(&mut r, &["FUNCTION", "FLUSH"], "+OK\r\n");
    exact(
        &mut r,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=mylib\nredis.register_function('zzz', function() return 'old' end)",
        ],
        "$5\r\nmylib\r\n",
    );
    assert_eq!(restore(&mut r, &redis_payload, Some("REPLACE")), ok());
    exact(
        &mut r,
        &["FCALL", "zzz", "0"],
        "-ERR Function not found\r\n",
    );
    exact(&mut r, &["FCALL", "myfunc", "0", "y"], "$1\r\ny\r\n");
    // Broken payloads.
    let mut bad = redis_payload.clone();
    *bad.last_mut().unwrap() ^= 1;
    let checksum = err("ERR DUMP payload version or checksum are wrong");
    assert_eq!(restore(&mut r, &bad, None), checksum);
    assert_eq!(restore(&mut r, b"garbage", None), checksum);
    assert_eq!(restore(&mut r, b"", None), checksum);
    assert_eq!(
        restore(&mut r, b"garbage", Some("FOO")),
        err("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
    );
    exact(
        &mut r,
        &["FUNCTION", "RESTORE"],
        "-ERR wrong number of arguments for 'function|restore' command\r\n",
    );
    let too_many: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", &redis_payload, b"APPEND", b"x"];
    assert_eq!(
        r.cmd(&too_many),
        err(
            "ERR unknown subcommand or wrong number of arguments for 'RESTORE'. Try FUNCTION HELP."
        )
    );
    // A key's DUMP (redis-server 7.0.15's `DUMP` of the string "v") is no
    // function payload.
    let key_dump: &[u8] = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce";
    assert_eq!(
        restore(&mut r, key_dump, None),
        err("ERR given type is not a function")
    );
    assert_eq!(names(&mut r), vec![bulk("mylib")]);
}

#[test]
fn function_stats_shape() {
    let s = fresh();
    let mut r = s.raw();
    exact(
        &mut r,
        &["FUNCTION", "STATS"],
        "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:0\r\n$15\r\nfunctions_count\r\n:0\r\n",
    );
    exact(&mut r, &["FUNCTION", "LOAD", LIB1], "$4\r\nlib1\r\n");
    exact(&mut r, &["FUNCTION", "LOAD", MYLIB], "$5\r\nmylib\r\n");
    exact(
        &mut r,
        &["FUNCTION", "STATS"],
        "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:2\r\n$15\r\nfunctions_count\r\n:4\r\n",
    );
    let mut r3 = resp3(&s);
    exact(
        &mut r3,
        &["FUNCTION", "STATS"],
        "%2\r\n$14\r\nrunning_script\r\n_\r\n$7\r\nengines\r\n%1\r\n$3\r\nLUA\r\n%2\r\n$15\r\nlibraries_count\r\n:2\r\n$15\r\nfunctions_count\r\n:4\r\n",
    );
    exact(
        &mut r,
        &["FUNCTION", "STATS", "x"],
        "-ERR wrong number of arguments for 'function|stats' command\r\n",
    );
}

#[test]
fn a_scripts_commands_are_in_the_slow_log_and_commandstats() {
    let s = fresh();
    let mut r = s.raw();
    exact(
        &mut r,
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        "+OK\r\n",
    );
    exact(&mut r, &["SLOWLOG", "RESET"], "+OK\r\n");
    exact(
        &mut r,
        &["EVAL", "redis.call('set','a','b') return 1", "0"],
        ":1\r\n",
    );
    let Frame::Array(entries) = r.cmd(&["SLOWLOG", "GET", "10"]) else {
        panic!("SLOWLOG GET")
    };
    // Newest first: the EVAL, then the SET it ran, from the script's
    // client ("?:0", no name), then SLOWLOG RESET.
    let shape: Vec<(Frame, Frame, Frame)> = entries
        .iter()
        .map(|e| match e {
            Frame::Array(f) => (f[3].clone(), f[4].clone(), f[5].clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(shape[1].0, bulks(&["set", "a", "b"]));
    assert_eq!(shape[1].1, bulk("?:0"));
    assert_eq!(shape[1].2, bulk(""));
    assert_eq!(
        shape[0].0,
        bulks(&["EVAL", "redis.call('set','a','b') return 1", "0"])
    );
    let Frame::Bulk(stats) = r.cmd(&["INFO", "commandstats"]) else {
        panic!("INFO")
    };
    let stats = String::from_utf8_lossy(&stats);
    assert!(stats.contains("cmdstat_set:calls=1,"), "{stats}");
    assert!(stats.contains("cmdstat_eval:calls=1,"), "{stats}");
}
