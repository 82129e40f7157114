//! Guards serving clients while the data set loads at start-up, as Redis
//! 7.0 does (Sentinel counts `-LOADING` as up, a refused connection as
//! down): the listeners are bound before loading; meanwhile `PING` and
//! every command not flagged `loading` get `-LOADING`, `INFO` says
//! `loading:1` with the `loading_*` fields, a transaction with a refused
//! command aborts, `SHUTDOWN` (even `SAVE`) exits without saving; once
//! loaded, every key is there. The same script runs against the real
//! redis-server, for the RDB and for the AOF.
mod common;

use common::ServerProcess;
use std::time::{Duration, Instant};

const LOADING: &[u8] = b"-LOADING Redis is loading the dataset in memory\r\n";

/// Keys written before the restart; with `key-load-delay 100` (µs a key)
/// the load takes a few seconds.
const KEYS: usize = 20_000;

fn server(kind: &str, extra: &[&str]) -> ServerProcess {
    let mut args = vec!["--key-load-delay", "100"];
    if kind == "redis" {
        // Redis serves its clients every this many bytes loaded (2 MB by
        // default: once or twice for a file this size).
        args.extend_from_slice(&["--loading-process-events-interval-bytes", "1024"]);
    }
    args.extend_from_slice(extra);
    match kind {
        "redis" => ServerProcess::redis(&args),
        _ => {
            args.extend_from_slice(&["--enable-debug-command", "yes"]);
            ServerProcess::ferrokv(&args)
        }
    }
}

fn fill(c: &mut redis::Connection, keys: usize) {
    let mut p = redis::pipe();
    for i in 0..keys {
        p.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("value-{i}"))
            .ignore();
    }
    p.query::<()>(c).unwrap();
}

fn digest(c: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(c).unwrap()
}

fn cmd(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    out
}

/// The `loading*` fields of `INFO persistence`, in order.
fn loading_fields(r: &mut common::Raw) -> Vec<(String, String)> {
    let info = r.cmd(&["INFO", "persistence"]);
    let text = String::from_utf8_lossy(info.as_bytes().expect("INFO is a bulk")).into_owned();
    text.lines()
        .filter(|l| l.starts_with("loading"))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// What a client sees during the load (the server must still be loading
/// when this is called), checked exactly.
fn check_while_loading(p: &ServerProcess, file_len: u64) {
    let mut r = p.raw();
    r.roundtrip(&cmd(&["PING"]), LOADING);
    r.roundtrip(&cmd(&["GET", "key:1"]), LOADING);
    let fields = loading_fields(&mut r);
    let names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "loading",
            "loading_start_time",
            "loading_total_bytes",
            "loading_rdb_used_mem",
            "loading_loaded_bytes",
            "loading_loaded_perc",
            "loading_eta_seconds"
        ],
        "{} {fields:?}",
        p.name
    );
    let field = |k: &str| fields.iter().find(|(n, _)| n == k).unwrap().1.clone();
    assert_eq!(field("loading"), "1");
    assert_eq!(
        field("loading_total_bytes"),
        file_len.to_string(),
        "{}",
        p.name
    );
    let loaded: u64 = field("loading_loaded_bytes").parse().unwrap();
    assert!(loaded <= file_len, "{} {loaded}", p.name);
    let perc: f64 = field("loading_loaded_perc").parse().unwrap();
    assert!((0.0..=100.0).contains(&perc), "{perc}");
    // A transaction with a refused command fails as a whole.
    let mut expected = b"+OK\r\n".to_vec();
    expected.extend_from_slice(LOADING);
    expected.extend_from_slice(b"-EXECABORT Transaction discarded because of previous errors.\r\n");
    let mut req = cmd(&["MULTI"]);
    req.extend(cmd(&["SET", "x", "1"]));
    req.extend(cmd(&["EXEC"]));
    r.roundtrip(&req, &expected);
    // Commands flagged `loading` run.
    r.roundtrip(&cmd(&["SELECT", "1"]), b"+OK\r\n");
    r.roundtrip(&cmd(&["CLIENT", "SETNAME", "during-load"]), b"+OK\r\n");
    r.roundtrip(&cmd(&["DBSIZE"]), LOADING);
    // A client that goes away mid-load, and one mid-command.
    for _ in 0..5 {
        let mut gone = p.raw();
        gone.roundtrip(&cmd(&["PING"]), LOADING);
    }
    let mut half = p.raw();
    half.send(b"*2\r\n$3\r\nGET\r\n$5\r\nke");
    drop(half);
    let fields = loading_fields(&mut r);
    assert_eq!(fields[0].1, "1", "{}: the load ended too soon", p.name);
}

/// Waits until `PING` answers `PONG` (the load is over).
fn wait_loaded(p: &ServerProcess) {
    let mut r = p.raw();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let reply = r.cmd(&["PING"]);
        if reply.as_bytes() == Some(b"PONG".as_slice()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never finished loading",
            p.name
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn rdb_load_serves_loading_clients(kind: &str) {
    let mut p = server(kind, &[]);
    let mut c = p.client();
    fill(&mut c, KEYS);
    let before = digest(&mut c);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    drop(c);
    let file_len = std::fs::metadata(p.dir.path().join("dump.rdb"))
        .unwrap()
        .len();
    p.kill_and_restart_no_wait();
    check_while_loading(&p, file_len);
    wait_loaded(&p);
    let mut c = p.client();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, KEYS);
    assert_eq!(digest(&mut c), before);
    let fields = loading_fields(&mut p.raw());
    assert_eq!(fields, [("loading".to_string(), "0".to_string())]);
    // The clients of the load are gone (or, one, still here).
    let clients: usize = common::ServerProcess::info_field(&p, "clients", "connected_clients")
        .unwrap()
        .parse()
        .unwrap();
    assert!(clients < 10, "{kind}: {clients} clients");
}

#[test]
fn rdb_load_answers_loading_then_has_every_key() {
    rdb_load_serves_loading_clients("ferrokv");
}

#[test]
fn rdb_load_answers_loading_in_redis_too() {
    rdb_load_serves_loading_clients("redis");
}

/// `rewrite`: the keys in an RDB base, with an incremental file of
/// commands after it; else every key a command of the incremental file
/// (key-load-delay slows both down, in Redis and in ferrokv).
fn aof_load_serves_loading_clients(kind: &str, rewrite: bool) {
    // Redis serves its clients every 1024 commands of an AOF (0.2 s here):
    // twice the keys, for the checks to end before the load does.
    let keys = if rewrite { KEYS } else { 2 * KEYS };
    let mut p = server(kind, &["--appendonly", "yes"]);
    let mut c = p.client();
    fill(&mut c, keys);
    if rewrite {
        let _: () = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        common::wait_for("the AOF rewrite", 60, || {
            (common::node::persistence_field(&mut c, "aof_rewrite_in_progress") == "0"
                && common::node::persistence_field(&mut c, "aof_rewrite_scheduled") == "0")
                .then_some(())
        });
    }
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("after:{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let before = digest(&mut c);
    drop(c);
    let aof_dir = p.dir.path().join("appendonlydir");
    let file_len: u64 = std::fs::read_dir(&aof_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        // The AOF's files: not the manifest, nor ferrokv's checksum
        // companions (`.sum`), which the load reads but does not count.
        .filter(|f| {
            let n = f.to_string_lossy();
            !n.ends_with(".manifest") && !n.ends_with(".sum")
        })
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    p.kill_and_restart_no_wait();
    check_while_loading(&p, file_len);
    wait_loaded(&p);
    let mut c = p.client();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, keys + 100);
    assert_eq!(digest(&mut c), before);
}

#[test]
fn aof_load_answers_loading_then_has_every_key() {
    aof_load_serves_loading_clients("ferrokv", true);
}

#[test]
fn aof_load_answers_loading_in_redis_too() {
    aof_load_serves_loading_clients("redis", true);
}

#[test]
fn aof_commands_replay_answers_loading_then_has_every_key() {
    aof_load_serves_loading_clients("ferrokv", false);
}

#[test]
fn aof_commands_replay_answers_loading_in_redis_too() {
    aof_load_serves_loading_clients("redis", false);
}

/// Fills and saves `p`, then kills and restarts it without waiting for
/// the load: the snapshot's path and bytes, to check nothing rewrote it.
fn saved_and_loading_again(p: &mut ServerProcess) -> (std::path::PathBuf, Vec<u8>) {
    let mut c = p.client();
    fill(&mut c, KEYS);
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    drop(c);
    let rdb = p.dir.path().join("dump.rdb");
    let saved = std::fs::read(&rdb).unwrap();
    p.kill_and_restart_no_wait();
    (rdb, saved)
}

fn shutdown_save_during_load_exits_without_saving(kind: &str) {
    let mut p = server(kind, &[]);
    let (rdb, saved) = saved_and_loading_again(&mut p);
    let mut r = p.raw();
    r.roundtrip(&cmd(&["PING"]), LOADING);
    r.send(&cmd(&["SHUTDOWN", "SAVE"]));
    assert_eq!(r.read_to_close(), b"");
    let status = p.child.wait().unwrap();
    assert!(status.success(), "{kind}: {status}");
    assert!(std::fs::read(&rdb).unwrap() == saved, "{kind} saved");
}

#[test]
fn shutdown_save_during_load_exits_without_saving_the_half_loaded_set() {
    shutdown_save_during_load_exits_without_saving("ferrokv");
}

#[test]
fn shutdown_save_during_load_in_redis_too() {
    shutdown_save_during_load_exits_without_saving("redis");
}

#[test]
fn sigterm_during_load_exits_without_saving() {
    let mut p = server("ferrokv", &["--save", "3600 1"]);
    let (rdb, saved) = saved_and_loading_again(&mut p);
    p.raw().roundtrip(&cmd(&["PING"]), LOADING);
    std::process::Command::new("kill")
        .args(["-TERM", &p.child.id().to_string()])
        .status()
        .unwrap();
    let status = p.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(std::fs::read(&rdb).unwrap() == saved, "saved during load");
    assert!(p.log().contains("during loading"), "{}", p.log());
}

#[test]
fn a_port_already_taken_stops_startup_before_loading() {
    let dir = tempfile::tempdir().unwrap();
    {
        let p = ServerProcess::ferrokv(&["--dir", dir.path().to_str().unwrap()]);
        let mut c = p.client();
        let _: () = redis::cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
        let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
        .args(["--port", &port, "--dir", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("DB loaded"), "{log}");
}
