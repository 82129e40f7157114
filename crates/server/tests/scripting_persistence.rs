//! Scripts and functions across processes: effects replication with a real
//! redis-server on either side, libraries in RDB files (ours loaded by
//! redis-server, Redis's loaded by ferrokv) and in the AOF, across restarts.

mod common;

use common::repl::*;
use common::{wait_for, ServerProcess};
use std::time::Duration;

const LIB: &str = "#!lua name=counters
local function bump(keys, args)
  local n = redis.call('INCRBY', keys[1], args[1])
  redis.call('RPUSH', keys[2], n)
  redis.call('HSET', keys[3], 'last', n)
  return n
end
redis.register_function('bump', bump)
redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}
";

/// A script of several writes of several types, with a relative expiry
/// (propagated as an absolute one) and a value computed in Lua.
const SCRIPT: &str = "
local n = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], 'v' .. n, 'EX', 1000)
redis.call('SADD', KEYS[3], n, n * 2)
redis.call('ZADD', KEYS[4], n / 3, 'm' .. n)
redis.call('LPUSH', KEYS[5], tostring(n * 1.5))
if n % 3 == 0 then redis.call('DEL', KEYS[3]) end
return n
";

fn redis(extra: &[&str]) -> ServerProcess {
    ServerProcess::redis(extra)
}

fn cmd(p: &ServerProcess, args: &[&str]) -> redis::Value {
    let mut c = p.client();
    let mut q = redis::cmd(args[0]);
    for a in &args[1..] {
        q.arg(*a);
    }
    q.query(&mut c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a mixed load of scripts and functions on `p`.
fn script_load(p: &ServerProcess, rounds: usize) {
    let mut c = p.client();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SCRIPT)
        .query(&mut c)
        .unwrap();
    for i in 0..rounds {
        let keys = [
            format!("s:ctr:{}", i % 7),
            format!("s:str:{}", i % 11),
            format!("s:set:{}", i % 5),
            format!("s:z:{}", i % 3),
            format!("s:list:{}", i % 4),
        ];
        let mut q = if i % 2 == 0 {
            let mut q = redis::cmd("EVALSHA");
            q.arg(&sha);
            q
        } else {
            let mut q = redis::cmd("EVAL");
            q.arg(SCRIPT);
            q
        };
        q.arg(5).arg(&keys);
        let _: i64 = q.query(&mut c).unwrap();
        let _: i64 = redis::cmd("FCALL")
            .arg("bump")
            .arg(3)
            .arg(format!("f:ctr:{}", i % 5))
            .arg("f:log")
            .arg("f:h")
            .arg(i % 9 + 1)
            .query(&mut c)
            .unwrap();
        // A script that only reads propagates nothing.
        let _: redis::Value = redis::cmd("FCALL_RO")
            .arg("peek")
            .arg(1)
            .arg("f:ctr:0")
            .query(&mut c)
            .unwrap();
    }
}

/// A script with one write kept off the AOF and the replicas (set_repl).
fn local_write(p: &ServerProcess) {
    let _: redis::Value = redis::cmd("EVAL")
        .arg("redis.set_repl(redis.REPL_NONE) redis.call('SET', 'local-only', 1) redis.set_repl(redis.REPL_ALL) return redis.call('SET', 'everywhere', 1)")
        .arg(0)
        .query(&mut p.client())
        .unwrap();
}

fn libraries(p: &ServerProcess) -> Vec<String> {
    let mut c = p.client();
    let v: Vec<redis::Value> = redis::cmd("FUNCTION").arg("LIST").query(&mut c).unwrap();
    let mut names = Vec::new();
    for lib in v {
        if let redis::Value::Array(fields) = lib {
            for pair in fields.chunks(2) {
                if let [redis::Value::BulkString(k), redis::Value::BulkString(v)] = pair {
                    if k == b"library_name" {
                        names.push(String::from_utf8_lossy(v).into_owned());
                    }
                }
            }
        }
    }
    names.sort();
    names
}

fn exists(p: &ServerProcess, key: &str) -> i64 {
    let mut c = p.client();
    redis::cmd("EXISTS").arg(key).query(&mut c).unwrap()
}

fn load_library(p: &ServerProcess) {
    let mut c = p.client();
    let name: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(LIB)
        .query(&mut c)
        .unwrap();
    assert_eq!(name, "counters");
}

#[test]
fn ferrokv_master_runs_scripts_for_a_redis_replica() {
    let master = ferrokv(&["--repl-diskless-sync-delay", "0"]);
    // A library before the replica attaches travels in the full sync's
    // RDB; the rest of the load in the stream.
    load_library(&master);
    script_load(&master, 20);
    let replica = redis(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 60);
    assert_eq!(libraries(&replica), vec!["counters"]);
    script_load(&master, 60);
    let mut c = master.client();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(
            LIB.replace("counters", "counters2")
                .replace("'bump'", "'bump2'")
                .replace("'peek'", "'peek2'"),
        )
        .query(&mut c)
        .unwrap();
    wait_converged(&master, &replica, 30);
    assert_eq!(libraries(&replica), vec!["counters", "counters2"]);
    local_write(&master);
    wait_for("the replica to get the replicated half", 20, || {
        (exists(&replica, "everywhere") == 1).then_some(())
    });
    assert_eq!(exists(&replica, "local-only"), 0);
    assert_eq!(exists(&master, "local-only"), 1);
    let _: i64 = redis::cmd("DEL").arg("local-only").query(&mut c).unwrap();
    // FUNCTION DELETE and FLUSH replicate too.
    let _: String = redis::cmd("FUNCTION")
        .arg("DELETE")
        .arg("counters2")
        .query(&mut c)
        .unwrap();
    wait_converged(&master, &replica, 30);
    assert_eq!(libraries(&replica), vec!["counters"]);
}

#[test]
fn redis_master_runs_scripts_for_a_ferrokv_replica() {
    let master = redis(&["--repl-diskless-sync-delay", "0"]);
    load_library(&master);
    script_load(&master, 20);
    let replica = ferrokv(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 60);
    // Redis's RDB carried the library (opcode FUNCTION2).
    assert_eq!(libraries(&replica), vec!["counters"]);
    script_load(&master, 60);
    wait_converged(&master, &replica, 30);
    // The replica can run the functions it received (read-only ones: it
    // is a read-only replica).
    let v = cmd(&replica, &["FCALL_RO", "peek", "1", "f:ctr:0"]);
    assert_eq!(v, cmd(&master, &["GET", "f:ctr:0"]));
    let mut c = master.client();
    let _: String = redis::cmd("FUNCTION").arg("FLUSH").query(&mut c).unwrap();
    wait_converged(&master, &replica, 30);
    assert!(libraries(&replica).is_empty());
}

#[test]
fn libraries_survive_rdb_restarts_and_cross_to_redis() {
    let mut p = ferrokv(&[]);
    load_library(&p);
    script_load(&p, 10);
    let before = digest(&p);
    let _: String = redis::cmd("SAVE").query(&mut p.client()).unwrap();
    p.kill_and_restart();
    assert_eq!(libraries(&p), vec!["counters"]);
    assert_eq!(digest(&p), before);
    let v = cmd(&p, &["FCALL", "bump", "3", "a", "b", "c", "5"]);
    assert_eq!(v, redis::Value::Int(5));
    // Our dump.rdb, loaded by the real redis-server.
    let _: String = redis::cmd("SAVE").query(&mut p.client()).unwrap();
    let theirs = redis(&[]);
    std::fs::copy(
        p.dir.path().join("dump.rdb"),
        theirs.dir.path().join("dump.rdb"),
    )
    .unwrap();
    let _: String = redis::cmd("DEBUG")
        .arg("RELOAD")
        .arg("NOSAVE")
        .query(&mut theirs.client())
        .unwrap();
    assert_eq!(libraries(&theirs), vec!["counters"]);
    assert_eq!(digest(&theirs), digest(&p));
    // And Redis's file (with a library of its own) loaded by ferrokv.
    let mut rc = theirs.client();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("#!lua name=theirs\nredis.register_function('t', function() return 't' end)")
        .query(&mut rc)
        .unwrap();
    let _: String = redis::cmd("SAVE").query(&mut rc).unwrap();
    std::fs::copy(
        theirs.dir.path().join("dump.rdb"),
        p.dir.path().join("dump.rdb"),
    )
    .unwrap();
    let _: String = redis::cmd("DEBUG")
        .arg("RELOAD")
        .arg("NOSAVE")
        .query(&mut p.client())
        .unwrap();
    assert_eq!(libraries(&p), vec!["counters", "theirs"]);
    assert_eq!(
        cmd(&p, &["FCALL", "t", "0"]),
        redis::Value::BulkString(b"t".to_vec())
    );
    // FUNCTION DUMP payloads cross both ways.
    let ours: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut p.client())
        .unwrap();
    let fresh = redis(&[]);
    let _: String = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&ours)
        .query(&mut fresh.client())
        .unwrap();
    assert_eq!(libraries(&fresh), vec!["counters", "theirs"]);
    let theirs_dump: Vec<u8> = redis::cmd("FUNCTION")
        .arg("DUMP")
        .query(&mut fresh.client())
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("RESTORE")
        .arg(&theirs_dump)
        .arg("FLUSH")
        .query(&mut p.client())
        .unwrap();
    assert_eq!(libraries(&p), vec!["counters", "theirs"]);
}

#[test]
fn scripts_and_libraries_survive_aof_restarts_and_rewrites() {
    let mut p = ferrokv(&["--appendonly", "yes", "--appendfsync", "always"]);
    load_library(&p);
    script_load(&p, 15);
    let before = digest(&p);
    p.kill_and_restart();
    assert_eq!(libraries(&p), vec!["counters"]);
    assert_eq!(digest(&p), before);
    // A rewrite puts the libraries in the new base (an RDB).
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut p.client()).unwrap();
    wait_for("the AOF rewrite", 30, || {
        (info(&p, "persistence", "aof_rewrite_in_progress") == "0"
            && info(&p, "persistence", "aof_rewrite_scheduled") != "1")
            .then_some(())
    });
    std::thread::sleep(Duration::from_millis(200));
    script_load(&p, 5);
    let before = digest(&p);
    p.kill_and_restart();
    assert_eq!(libraries(&p), vec!["counters"]);
    assert_eq!(digest(&p), before);
    // The real redis-server reads our AOF directory: same data, same library.
    let theirs_dir = tempfile::tempdir().unwrap();
    let src = p.dir.path().join("appendonlydir");
    let dst = theirs_dir.path().join("appendonlydir");
    std::fs::create_dir(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    /// Kills the server however the test ends.
    struct Reaper(std::process::Child);
    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Reaper(
        std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--dir",
                theirs_dir.path().to_str().unwrap(),
                "--appendonly",
                "yes",
                "--save",
                "",
                "--enable-debug-command",
                "yes",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = wait_for("redis-server on our AOF", 20, || {
        let mut c = client.get_connection().ok()?;
        redis::cmd("PING").query::<String>(&mut c).ok()?;
        let loading: String = redis::cmd("INFO").arg("persistence").query(&mut c).ok()?;
        (!loading.contains("loading:1")).then_some(c)
    });
    let d: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap();
    assert_eq!(d, digest(&p));
    let n: i64 = redis::cmd("FCALL")
        .arg("bump")
        .arg(3)
        .arg("x")
        .arg("y")
        .arg("z")
        .arg(2)
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 2);
}
