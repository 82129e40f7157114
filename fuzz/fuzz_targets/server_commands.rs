//! Arbitrary command sequences against an in-process server (no sockets):
//! the bytes decode into commands of the real command table with
//! arguments from a dictionary of edge values, keys, keywords and
//! patterns, run on three connections through the real dispatch
//! (`ferrokv_server::command_fuzz` has the decoding and the checks). A run
//! fails on a panic in the server, on a command that takes more than 1 s
//! (the step budget, a wall clock: the release build answers any sane
//! command in microseconds, so a second means super-linear work), and on a
//! broken invariant: a reply that is not valid RESP or a command that does
//! not answer; after the sequence, a full SCAN, `KEYS *`, `DBSIZE` and
//! `INFO keyspace` that disagree, a key whose `TYPE` is not its `OBJECT
//! ENCODING`'s family, or a `DEBUG DIGEST` that `DEBUG RELOAD` changes.
//!
//!   cargo +nightly fuzz run -s none server_commands -- -max_total_time=300 \
//!       -len_control=0 -max_len=2048 -timeout=30
//!
//! (`-s none`: the server allocates through mimalloc, which AddressSanitizer
//! does not see, so it would only slow the run.) The first thing it found
//! was the exponential glob matcher (`CONFIG GET *?*?...*?b`), fixed since.
//!
//! A crash artifact reads as commands with
//! `FERROKV_FUZZ_INPUT=<artifact> cargo test -p ferrokv-server --test
//! fuzz_replay -- --ignored --nocapture fuzz_input_file`; once its bug is
//! fixed, it joins `fuzz/regressions/server_commands/`, which that test
//! file replays on every run.
#![no_main]

use ferrokv_server::alloc::CountingAlloc;
use ferrokv_server::command_fuzz::{run, Options};
use libfuzzer_sys::fuzz_target;

// As the server binary: `maxmemory` and `INFO memory` need the count.
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fuzz_target!(|data: &[u8]| {
    run(data, &Options::default());
});
