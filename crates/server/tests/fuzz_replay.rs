//! The command fuzzer's harness (`ferrokv_server::command_fuzz`) on every
//! test run, without cargo-fuzz: a fixed set of seeded random inputs, the
//! reproducers of bugs the fuzzer found (`fuzz/regressions/server_commands`),
//! and the harness's own failure detection. Guards against panics, hangs
//! and broken keyspace invariants in the command layer, and against the
//! harness rotting unseen between fuzzing sessions.
//!
//! `FERROKV_FUZZ_INPUT=path cargo test -p ferrokv-server --test fuzz_replay
//! -- --ignored --nocapture fuzz_input_file` prints what a fuzzer artifact decodes
//! to and runs it.

use ferrokv_server::alloc::CountingAlloc;
use ferrokv_server::command_fuzz::{self, Options, Program, Setup, Step};
use rand::{Rng, SeedableRng};
use std::time::Duration;

// As the server binary and the fuzz target: `maxmemory` needs the count.
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Debug code is some ten times slower than the fuzz target's release
/// build (1 s): a command over this is a hang all the same.
fn test_options() -> Options {
    Options {
        step_budget: Duration::from_secs(10),
        max_commands: 128,
    }
}

#[test]
fn seeded_random_inputs_run_without_panic_hang_or_broken_invariant() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(15);
    for seed in 0..1000 {
        let len = rng.gen_range(16..1200);
        let input: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let r = std::panic::catch_unwind(|| command_fuzz::run(&input, &test_options()));
        if r.is_err() {
            let path = std::env::temp_dir().join(format!("ferrokv-fuzz-replay-seed-{seed}"));
            std::fs::write(&path, &input).expect("write the failing input");
            panic!(
                "seeded input {seed} failed; it is in {} (FERROKV_FUZZ_INPUT)",
                path.display()
            );
        }
    }
}

/// Inputs the fuzzer found failing, kept once fixed (in the server or in
/// the harness). They are bytes for the command table of their day: a new
/// command shifts what they decode to, so they stay as seeds, while the
/// behaviour each one found has a named step in the program test below.
#[test]
fn fuzzer_reproducers_stay_fixed() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/regressions/server_commands"
    );
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the reproducers' directory")
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no reproducers in {dir}");
    for f in files {
        let input = std::fs::read(&f).expect("read a reproducer");
        let r = std::panic::catch_unwind(|| command_fuzz::run(&input, &test_options()));
        assert!(r.is_ok(), "{} fails again", f.display());
    }
}

/// A fuzzer artifact named by `FERROKV_FUZZ_INPUT`: its program, then its run.
#[test]
#[ignore = "a tool: set FERROKV_FUZZ_INPUT and run with --ignored"]
fn fuzz_input_file() {
    let path = std::env::var("FERROKV_FUZZ_INPUT").expect("FERROKV_FUZZ_INPUT names an input");
    let input = std::fs::read(&path).expect("read FERROKV_FUZZ_INPUT");
    let program = command_fuzz::decode(&input, test_options().max_commands);
    println!("{}", command_fuzz::describe(&program));
    command_fuzz::run_program(&program, &test_options());
}

fn program(steps: &[(usize, &[&str])]) -> Program {
    Program {
        setup: Setup {
            maxmemory_policy: "noeviction",
            ..Setup::default()
        },
        steps: steps
            .iter()
            .map(|(c, argv)| Step {
                connection: *c,
                argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
            })
            .collect(),
    }
}

#[test]
fn a_program_over_every_type_passes_the_invariants() {
    command_fuzz::run_program(
        &program(&[
            (0, &["SET", "a", "1"]),
            (0, &["APPEND", "a", "xyz"]),
            (1, &["RPUSH", "b", "x", "y"]),
            (1, &["SADD", "c", "1", "2", "z"]),
            (2, &["ZADD", "{a}b", "1", "m"]),
            (2, &["HSET", "", "f", "v"]),
            (0, &["PEXPIRE", "a", "100000"]),
            (0, &["SELECT", "3"]),
            (0, &["SET", "a", "in db 3"]),
            (1, &["SUBSCRIBE", "ch"]),
            (2, &["PUBLISH", "ch", "hello"]),
            (2, &["MULTI"]),
            (2, &["INCR", "n"]),
            (2, &["EXEC"]),
            (0, &["CLIENT", "KILL", "TYPE", "pubsub"]),
            (1, &["PING"]),
            (2, &["HELLO", "3"]),
            (2, &["DEBUG", "PROTOCOL", "attrib"]),
            (2, &["BLPOP", "nothing", "0"]),
            // As Redis 7.0: one array element, then the second channel's reply.
            (0, &["MULTI"]),
            (0, &["SUBSCRIBE", "x", "y"]),
            (0, &["EXEC"]),
            // Succeeds and answers nothing (a real server exits).
            (1, &["SHUTDOWN", "NOSAVE"]),
        ]),
        &test_options(),
    );
}

/// A monitor's own commands answer their reply and then their line, and a
/// second MONITOR answers nothing: the one-reply invariant leaves them out
/// (it failed such programs before), and the other connections' lines
/// still parse as RESP.
#[test]
fn a_program_with_a_monitor_passes_the_invariants() {
    command_fuzz::run_program(
        &program(&[
            (0, &["MONITOR"]),
            (1, &["SET", "k", "v\r\n\x00"]),
            (0, &["PING"]),
            (0, &["MONITOR"]),
            (0, &["GET", "k"]),
            (2, &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"]),
            (0, &["RESET"]),
            (0, &["GET", "k"]),
            (1, &["MULTI"]),
            (1, &["MONITOR"]),
            (1, &["EXEC"]),
        ]),
        &test_options(),
    );
}

#[test]
#[should_panic(expected = "step budget exceeded: command 0 `SET a 1`")]
fn a_command_over_the_step_budget_fails_the_run() {
    let opts = Options {
        step_budget: Duration::ZERO,
        ..test_options()
    };
    command_fuzz::run_program(&program(&[(0, &["SET", "a", "1"])]), &opts);
}

#[test]
fn replies_that_are_not_resp_are_caught() {
    assert_eq!(command_fuzz::frames(b"+OK\r\n:1\r\n").unwrap().len(), 2);
    assert_eq!(
        command_fuzz::frames(b"$5\r\nab").unwrap_err(),
        "reply cut short at byte 0"
    );
    assert!(command_fuzz::frames(b"+OK\r\n!x\r\n")
        .unwrap_err()
        .starts_with("invalid RESP at byte 5"));
    // An attribute is taken apart; the reply after it is the frame.
    assert_eq!(
        command_fuzz::frames(b"|1\r\n+k\r\n:1\r\n+reply\r\n")
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn the_harness_refuses_only_what_leaves_the_process_or_sleeps() {
    let argv = |s: &str| -> Vec<Vec<u8>> { s.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
    for refused in [
        "DEBUG SLEEP 0",
        "REPLICAOF 127.0.0.1 6379",
        "SYNC",
        "WAIT 1 0",
        "CONFIG SET maxmemory 1 DIR /",
    ] {
        assert!(command_fuzz::refused(&argv(refused)), "{refused}");
    }
    for runs in [
        "DEBUG RELOAD",
        "REPLICAOF no one",
        "WAIT 0 0",
        "CONFIG SET maxmemory 1",
        "BLPOP a 0",
        "SHUTDOWN",
    ] {
        assert!(!command_fuzz::refused(&argv(runs)), "{runs}");
    }
}
