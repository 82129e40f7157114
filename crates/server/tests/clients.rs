//! Guards compatibility with real Redis clients and tools run as separate
//! processes: redis-py (RESP2 and RESP3, with its CLIENT SETINFO and
//! HELLO 3 handshakes), redis-py's `Lock` and Lua scripts from several
//! threads (`clients/redis_py_lock.py`), `redis-cli` and `redis-benchmark`.
//!
//! A missing tool fails the test loudly: these are the clients users run.
mod common;
use common::reply::own_server;
use common::ServerProcess;
use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (is it installed?)"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{text}",
        out.status
    );
    text
}

#[test]
fn redis_py_smoke_script_passes_over_resp2_and_resp3() {
    require_redis_py();
    let s = ServerProcess::ferrokv(&[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/redis_py_smoke.py"
    );
    let out = run(Command::new("python3").arg(script).arg(s.port.to_string()));
    assert!(out.contains(": OK"), "{out}");
}

/// Fails loudly when python3 or redis-py is missing.
fn require_redis_py() {
    let import = Command::new("python3")
        .args(["-c", "import redis; print(redis.__version__)"])
        .output()
        .expect("python3 is required for this test");
    assert!(
        import.status.success(),
        "redis-py is required for this test (`pip install redis`): {}",
        String::from_utf8_lossy(&import.stderr)
    );
}

/// redis-py's `Lock` (acquire, extend, reacquire, release, wrong tokens,
/// threads contending) and a token bucket and a compare-and-delete script
/// run from several threads, over RESP2 and RESP3. Runs against the real
/// redis-server with `FERROKV_TESTS_TARGET=redis`.
#[test]
fn redis_py_lock_and_scripts_pass_over_resp2_and_resp3() {
    require_redis_py();
    let s = own_server(&[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/redis_py_lock.py"
    );
    let out = run(Command::new("python3").arg(script).arg(s.port.to_string()));
    assert!(out.contains("Lock and scripts: OK"), "{out}");
}

#[test]
fn redis_cli_commands_succeed() {
    let s = ServerProcess::ferrokv(&[]);
    let port = s.port.to_string();
    let cli = |args: &[&str]| {
        run(Command::new("redis-cli")
            .args(["-p", &port, "--no-raw"])
            .args(args))
    };
    assert_eq!(cli(&["set", "a", "b"]), "OK\n");
    assert_eq!(cli(&["get", "a"]), "\"b\"\n");
    assert_eq!(cli(&["get", "missing"]), "(nil)\n");
    assert_eq!(cli(&["incr", "n"]), "(integer) 1\n");
    assert_eq!(cli(&["mget", "a", "missing"]), "1) \"b\"\n2) (nil)\n");
    assert_eq!(
        cli(&["nosuch"]),
        "(error) ERR unknown command 'nosuch', with args beginning with: \n"
    );
    // RESP3 through redis-cli -3.
    assert_eq!(
        cli(&["-3", "config", "get", "maxclients"]),
        "1# \"maxclients\" => \"10000\"\n"
    );
    let info = run(Command::new("redis-cli").args(["-p", &port, "info", "server"]));
    assert!(info.contains("redis_version:7.0.15"), "{info}");
    // Commands piped on stdin, as scripts use it.
    let mut child = Command::new("redis-cli")
        .args(["-p", &port])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli is required");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"set piped 1\nincrby piped 41\nget piped\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n42\n42\n");
}

#[test]
fn redis_benchmark_set_get_succeeds() {
    let s = ServerProcess::ferrokv(&[]);
    let out = run(Command::new("redis-benchmark").args([
        "-p",
        &s.port.to_string(),
        "-t",
        "set,get",
        "-n",
        "2000",
        "-q",
    ]));
    for test in ["SET: ", "GET: "] {
        let line = out
            .lines()
            .flat_map(|l| l.split('\r'))
            .find(|l| l.starts_with(test) && l.contains("requests per second"))
            .unwrap_or_else(|| panic!("no {test} result in {out}"));
        assert!(!line.contains("rps=0.0"), "{line}");
    }
    // Every request was executed.
    let calls = s.info_field("commandstats", "cmdstat_set").unwrap();
    assert!(calls.starts_with("calls=2000,"), "{calls}");
}
