//! Guards the busy-script protocol of Redis 7.0: once a script has run
//! longer than `busy-reply-threshold` (alias `lua-time-limit`), every other
//! client gets `-BUSY` (new connections too, and they are still answered),
//! `SCRIPT KILL` / `FUNCTION KILL` end a script that has not written (its
//! caller gets Redis's exact error), a script that wrote is `-UNKILLABLE`
//! and only `SHUTDOWN NOSAVE` ends it, and a slow script that finishes by
//! itself still delivers its reply.
//!
//! Every test starts its own server. Timing is only ever "answered within N
//! seconds": the threshold is set to 100 ms and every wait is generous.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run against the real `redis-server`.
mod common;
#[allow(unused_imports)]
use common::reply::*;
use common::{wait_for, Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const BUSY_SCRIPT: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &str =
    "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
const UNKILLABLE: &str = "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n";
const NOTBUSY: &str = "-NOTBUSY No scripts in execution right now.\r\n";

/// A fresh server of the target under test, its busy threshold at 100 ms.
fn fresh() -> ServerProcess {
    let s = own_server(&[]);
    let mut r = s.raw();
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "busy-reply-threshold", "100"]),
        ok()
    );
    s
}

/// The exact bytes of the reply to `args`.
fn reply_bytes(r: &mut Raw, args: &[&str]) -> String {
    let (_, bytes) = r
        .try_cmd_bytes(args)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Sends `args` on a connection of its own, in a thread that returns the
/// reply's bytes (or why there is none).
fn run_in_background(s: &ServerProcess, args: &[&str]) -> JoinHandle<Result<String, String>> {
    let mut r = s.raw();
    r.s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    std::thread::spawn(move || {
        r.try_cmd_bytes(&args)
            .map(|(_, b)| String::from_utf8_lossy(&b).into_owned())
    })
}

/// Waits until PING on `r` gets `busy` (the script passed the threshold).
fn wait_busy(r: &mut Raw, busy: &str) {
    wait_for("the server to report a busy script", 10, || {
        (reply_bytes(r, &["PING"]) == busy).then_some(())
    });
}

/// Joins the caller's thread, which must finish within `secs`.
fn caller_reply(h: JoinHandle<Result<String, String>>, secs: u64) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !h.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the script's caller got no reply in {secs} s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    h.join().unwrap()
}

#[test]
fn busy_script_gets_busy_replies_and_script_kill_ends_it() {
    let s = fresh();
    let script = "while true do end";
    let caller = run_in_background(&s, &["EVAL", script, "0"]);
    let mut other = s.raw();
    wait_busy(&mut other, BUSY_SCRIPT);
    for args in [
        &["GET", "x"][..],
        &["SET", "x", "1"],
        &["EVAL", "return 1", "0"],
        &["SCRIPT", "EXISTS", "a"],
        &["SCRIPT", "FLUSH"],
        &["FUNCTION", "STATS"],
        // FUNCTION KILL does not kill an EVAL script.
        &["FUNCTION", "KILL"],
        &["CONFIG", "GET", "busy-reply-threshold"],
        &["INFO", "server"],
        &["CLIENT", "LIST"],
    ] {
        assert_eq!(reply_bytes(&mut other, args), BUSY_SCRIPT, "{args:?}");
    }
    // A client that connects now is accepted and answered.
    let mut late = s.raw();
    assert_eq!(reply_bytes(&mut late, &["PING"]), BUSY_SCRIPT);
    let hello = late.cmd(&["HELLO", "3"]);
    assert!(
        matches!(hello, Frame::Map(_)),
        "HELLO 3 while busy: {hello:?}"
    );
    assert_eq!(reply_bytes(&mut late, &["PING"]), BUSY_SCRIPT);
    assert_eq!(reply_bytes(&mut other, &["SCRIPT", "KILL"]), "+OK\r\n");
    assert_eq!(
        caller_reply(caller, 10),
        Ok("-ERR Script killed by user with SCRIPT KILL... script: 694a5fe1ddb97a4c6a1bf299d9537c7d3d0f84e7, on @user_script:1.\r\n".to_string())
    );
    assert_eq!(reply_bytes(&mut other, &["PING"]), "+PONG\r\n");
    assert_eq!(reply_bytes(&mut late, &["PING"]), "+PONG\r\n");
    assert_eq!(reply_bytes(&mut other, &["SCRIPT", "KILL"]), NOTBUSY);
    assert_eq!(reply_bytes(&mut other, &["FUNCTION", "KILL"]), NOTBUSY);
    // The server goes on as usual, scripts included.
    assert_eq!(
        reply_bytes(&mut other, &["EVAL", "return 7", "0"]),
        ":7\r\n"
    );
}

#[test]
fn lua_time_limit_is_the_same_threshold() {
    let s = fresh();
    let mut r = s.raw();
    assert_eq!(r.cmd(&["CONFIG", "SET", "lua-time-limit", "150"]), ok());
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "busy-reply-threshold"]),
        bulks(&["busy-reply-threshold", "150"])
    );
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "lua-time-limit"]),
        bulks(&["lua-time-limit", "150"])
    );
    let caller = run_in_background(&s, &["EVAL", "while true do end", "0"]);
    wait_busy(&mut r, BUSY_SCRIPT);
    assert_eq!(reply_bytes(&mut r, &["SCRIPT", "KILL"]), "+OK\r\n");
    let got = caller_reply(caller, 10).unwrap();
    assert!(
        got.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{got}"
    );
}

#[test]
fn a_slow_script_that_finishes_by_itself_still_replies() {
    let s = fresh();
    // Spins for 1 s of server time (TIME is allowed in scripts).
    let script = "local t = redis.call('time'); local start = t[1]*1e6+t[2]; \
                  repeat local n = redis.call('time') until n[1]*1e6+n[2] - start > 1000000; \
                  return 'done'";
    let caller = run_in_background(&s, &["EVAL", script, "0"]);
    let mut other = s.raw();
    wait_busy(&mut other, BUSY_SCRIPT);
    // The script is still spinning (BUSY) or done (PONG): the threshold
    // itself never kills it.
    wait_for("the slow script to end", 10, || {
        let got = reply_bytes(&mut other, &["PING"]);
        assert!(got == BUSY_SCRIPT || got == "+PONG\r\n", "{got}");
        (got == "+PONG\r\n").then_some(())
    });
    assert_eq!(caller_reply(caller, 10), Ok("$4\r\ndone\r\n".to_string()));
}

#[test]
fn a_script_that_wrote_is_unkillable_and_shutdown_nosave_ends_the_server() {
    let mut s = fresh();
    let caller = run_in_background(
        &s,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'x') while true do end",
            "1",
            "wk",
        ],
    );
    let mut other = s.raw();
    wait_busy(&mut other, BUSY_SCRIPT);
    assert_eq!(reply_bytes(&mut other, &["SCRIPT", "KILL"]), UNKILLABLE);
    assert_eq!(reply_bytes(&mut other, &["FUNCTION", "KILL"]), UNKILLABLE);
    // Plain SHUTDOWN would save: refused as any other command.
    assert_eq!(reply_bytes(&mut other, &["SHUTDOWN"]), BUSY_SCRIPT);
    assert_eq!(reply_bytes(&mut other, &["PING"]), BUSY_SCRIPT);
    // SHUTDOWN NOSAVE: no reply, the connection closes, the process exits.
    let gone = other.try_cmd_bytes(&["SHUTDOWN", "NOSAVE"]);
    assert!(gone.is_err(), "SHUTDOWN NOSAVE replied {gone:?}");
    wait_for("the server to exit", 10, || (!s.alive()).then_some(()));
    // The script's caller never gets a reply: its connection closes.
    assert!(caller_reply(caller, 10).is_err());
}

#[test]
fn busy_fcall_is_ended_by_function_kill() {
    let s = fresh();
    let mut r = s.raw();
    let lib = "#!lua name=busy\n\
               redis.register_function('spin', function() while true do end end)\n\
               redis.register_function('wspin', function(keys) redis.call('set', keys[1], 'x') while true do end end)";
    assert_eq!(r.cmd(&["FUNCTION", "LOAD", lib]), bulk("busy"));
    let caller = run_in_background(&s, &["FCALL", "spin", "0"]);
    wait_busy(&mut r, BUSY_FUNCTION);
    assert_eq!(reply_bytes(&mut r, &["GET", "x"]), BUSY_FUNCTION);
    // SCRIPT KILL does not kill a function.
    assert_eq!(reply_bytes(&mut r, &["SCRIPT", "KILL"]), BUSY_FUNCTION);
    // FUNCTION STATS answers while a function runs, and names it.
    let stats = r.cmd(&["FUNCTION", "STATS"]);
    let Frame::Array(top) = &stats else {
        panic!("FUNCTION STATS: {stats:?}")
    };
    assert_eq!(top.len(), 4, "{stats:?}");
    assert_eq!(top[0], bulk("running_script"));
    let Frame::Array(running) = &top[1] else {
        panic!("running_script: {stats:?}")
    };
    assert_eq!(running.len(), 6, "{stats:?}");
    assert_eq!(running[0], bulk("name"));
    assert_eq!(running[1], bulk("spin"));
    assert_eq!(running[2], bulk("command"));
    assert_eq!(running[3], bulks(&["FCALL", "spin", "0"]));
    assert_eq!(running[4], bulk("duration_ms"));
    assert!(
        matches!(running[5], Frame::Integer(ms) if ms >= 0),
        "{stats:?}"
    );
    assert_eq!(top[2], bulk("engines"));
    let mut late = s.raw();
    assert_eq!(reply_bytes(&mut late, &["PING"]), BUSY_FUNCTION);
    assert_eq!(reply_bytes(&mut r, &["FUNCTION", "KILL"]), "+OK\r\n");
    assert_eq!(
        caller_reply(caller, 10),
        Ok(
            "-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.\r\n"
                .to_string()
        )
    );
    assert_eq!(reply_bytes(&mut r, &["PING"]), "+PONG\r\n");
    assert_eq!(reply_bytes(&mut r, &["FUNCTION", "KILL"]), NOTBUSY);
    assert_eq!(
        reply_bytes(&mut r, &["FUNCTION", "STATS"]),
        "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n"
    );
    // A function that wrote cannot be killed either.
    let caller = run_in_background(&s, &["FCALL", "wspin", "1", "wk"]);
    wait_busy(&mut r, BUSY_FUNCTION);
    assert_eq!(reply_bytes(&mut r, &["FUNCTION", "KILL"]), UNKILLABLE);
    assert!(r.try_cmd_bytes(&["SHUTDOWN", "NOSAVE"]).is_err());
    assert!(caller_reply(caller, 10).is_err());
}

/// A `cmdstat_<name>` line's field, 0 when the command has no line.
fn cmdstat(r: &mut Raw, name: &str, field: &str) -> u64 {
    let Frame::Bulk(info) = r.cmd(&["INFO", "commandstats"]) else {
        panic!("INFO is a bulk string")
    };
    let info = String::from_utf8(info).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:")))
        .and_then(|l| {
            l.split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{field}=")))
        })
        .map_or(0, |v| v.parse().unwrap())
}

/// Transactions beside a busy script, as Redis's `rejectCommand`: a
/// command refused with `-BUSY` inside MULTI flags the transaction (its
/// EXEC answers EXECABORT … previous errors); an EXEC that arrives while
/// the script is busy is refused with `EXECABORT … BUSY …` and its
/// transaction discarded; the refusals count as the commands'
/// `rejected_calls`. And a command failing inside EXEC is a failed call of
/// that command, not of EXEC.
#[test]
fn transactions_beside_a_busy_script_are_aborted_as_redis_aborts_them() {
    let s = fresh();
    let mut queued = s.raw();
    assert_eq!(reply_bytes(&mut queued, &["MULTI"]), "+OK\r\n");
    assert_eq!(reply_bytes(&mut queued, &["SET", "x", "1"]), "+QUEUED\r\n");
    let caller = run_in_background(&s, &["EVAL", "while true do end", "0"]);
    let mut other = s.raw();
    wait_busy(&mut other, BUSY_SCRIPT);
    let mut late = s.raw();
    assert_eq!(reply_bytes(&mut late, &["MULTI"]), "+OK\r\n");
    assert_eq!(reply_bytes(&mut late, &["SET", "y", "1"]), BUSY_SCRIPT);
    assert_eq!(
        reply_bytes(&mut queued, &["EXEC"]),
        format!(
            "-EXECABORT Transaction discarded because of: {}",
            &BUSY_SCRIPT[1..]
        )
    );
    assert_eq!(reply_bytes(&mut other, &["SCRIPT", "KILL"]), "+OK\r\n");
    assert!(caller_reply(caller, 10).is_ok());
    assert_eq!(
        reply_bytes(&mut late, &["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // Both transactions are over: nothing of them ran.
    assert_eq!(
        reply_bytes(&mut queued, &["EXEC"]),
        "-ERR EXEC without MULTI\r\n"
    );
    assert_eq!(reply_bytes(&mut other, &["EXISTS", "x", "y"]), ":0\r\n");
    assert!(cmdstat(&mut other, "set", "rejected_calls") >= 1);
    assert!(cmdstat(&mut other, "exec", "rejected_calls") >= 1);
    // A command that fails inside EXEC: its failure, not EXEC's.
    assert_eq!(reply_bytes(&mut other, &["CONFIG", "RESETSTAT"]), "+OK\r\n");
    assert_eq!(reply_bytes(&mut other, &["SET", "s", "abc"]), "+OK\r\n");
    assert_eq!(reply_bytes(&mut other, &["MULTI"]), "+OK\r\n");
    assert_eq!(reply_bytes(&mut other, &["INCR", "s"]), "+QUEUED\r\n");
    assert_eq!(reply_bytes(&mut other, &["SET", "t", "1"]), "+QUEUED\r\n");
    let Frame::Array(v) = other.cmd(&["EXEC"]) else {
        panic!("EXEC runs its queue")
    };
    assert!(matches!(v[0], Frame::Error(_)), "{v:?}");
    assert_eq!(cmdstat(&mut other, "incr", "failed_calls"), 1);
    assert_eq!(cmdstat(&mut other, "exec", "calls"), 1);
    assert_eq!(cmdstat(&mut other, "exec", "failed_calls"), 0);
}
