//! Guards the fork-free snapshots: SAVE/BGSAVE files hold exactly the data
//! of the moment the save began (even while clients write), pass the real
//! `redis-check-rdb`, load into a real `redis-server` with the same digest,
//! survive a restart, and a corrupt file stops start-up with a clear error.
mod common;

use common::node::{digest, persistence_field, Node};
use common::ServerProcess;
use std::path::Path;
use std::process::Command;

fn fill(c: &mut redis::Connection, n: usize) {
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("value-{i}-{}", "x".repeat(i % 50)))
            .ignore();
        if i % 7 == 0 {
            p.cmd("PEXPIRE")
                .arg(format!("key:{i}"))
                .arg(10_000_000)
                .ignore();
        }
        if i % 5 == 0 {
            p.cmd("SET").arg(format!("int:{i}")).arg(i * 1000).ignore();
        }
    }
    p.cmd("SELECT").arg(3).ignore();
    p.cmd("SET")
        .arg(b"bin\x00\r\n\xff".as_slice())
        .arg(vec![0u8, 13, 10, 255, 7])
        .ignore();
    p.cmd("SET").arg("big").arg("z".repeat(200_000)).ignore();
    p.cmd("SELECT").arg(0).ignore();
    p.query::<()>(c).unwrap();
}

fn load_into_redis_and_digest(rdb: &Path) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(rdb, dir.path().join("dump.rdb")).unwrap();
    let r = ServerProcess::redis(&[
        "--dir",
        dir.path().to_str().unwrap(),
        "--dbfilename",
        "dump.rdb",
    ]);
    let mut c = r.client();
    digest(&mut c)
}

#[test]
fn save_then_restart_keeps_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let before;
    {
        let n = Node::start(dir.path(), &["--save", ""]);
        let mut c = n.client();
        fill(&mut c, 3000);
        before = digest(&mut c);
        let () = redis::cmd("SAVE").query(&mut c).unwrap();
        assert_eq!(
            persistence_field(&mut c, "rdb_changes_since_last_save"),
            "0"
        );
    } // killed (SIGKILL): only the SAVEd file is left
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
    assert_eq!(
        persistence_field(&mut c, "rdb_last_load_keys_loaded"),
        (3000 + 600 + 2).to_string()
    );
}

#[test]
fn snapshot_passes_redis_check_rdb_and_loads_into_redis_with_same_digest() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    fill(&mut c, 2000);
    let ours = digest(&mut c);
    let () = redis::cmd("SAVE").query(&mut c).unwrap();
    let rdb = dir.path().join("dump.rdb");
    let out = Command::new("redis-check-rdb")
        .arg(&rdb)
        .output()
        .expect("redis-check-rdb installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("RDB looks OK"),
        "{text}"
    );
    assert_eq!(load_into_redis_and_digest(&rdb), ours);
}

#[test]
fn bgsave_file_is_the_data_at_the_moment_the_save_began() {
    let dir = tempfile::tempdir().unwrap();
    // Pace the save (as Redis's rdb-key-save-delay does) so writes land
    // while it runs.
    let n = Node::start(dir.path(), &["--save", "", "--rdb-key-save-delay", "200"]);
    let mut c = n.client();
    fill(&mut c, 5000);
    let at_start = digest(&mut c);
    let reply: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(reply, "Background saving started");
    assert_eq!(persistence_field(&mut c, "rdb_bgsave_in_progress"), "1");
    let second: redis::RedisResult<String> = redis::cmd("BGSAVE").query(&mut c);
    assert!(second
        .unwrap_err()
        .to_string()
        .contains("Background save already in progress"));
    // Overwrite, delete, add, flush another db while the save runs.
    let mut writes = 0;
    while persistence_field(&mut c, "rdb_bgsave_in_progress") == "1" {
        let i = writes % 5000;
        let _: () = redis::cmd("SET")
            .arg(format!("key:{i}"))
            .arg("CHANGED")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("DEL")
            .arg(format!("int:{}", i - i % 5))
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(format!("new:{writes}"))
            .arg(writes)
            .query(&mut c)
            .unwrap();
        if writes == 10 {
            // The save's pacing shows: its share of the loop's time now.
            let share: u32 = persistence_field(&mut c, "current_save_loop_share")
                .parse()
                .unwrap();
            assert!((1..=100).contains(&share), "{share}");
        }
        if writes == 50 {
            let _: () = redis::cmd("SELECT").arg(3).query(&mut c).unwrap();
            let _: () = redis::cmd("FLUSHDB").query(&mut c).unwrap();
            let _: () = redis::cmd("SELECT").arg(0).query(&mut c).unwrap();
        }
        writes += 1;
        assert!(writes < 2_000_000, "save never finished");
    }
    assert!(
        writes > 100,
        "the save finished before the writes: {writes}"
    );
    assert_eq!(persistence_field(&mut c, "rdb_last_bgsave_status"), "ok");
    assert_eq!(persistence_field(&mut c, "current_save_loop_share"), "0");
    assert_ne!(digest(&mut c), at_start);
    assert_eq!(
        load_into_redis_and_digest(&dir.path().join("dump.rdb")),
        at_start
    );
}

#[test]
fn corrupt_snapshot_stops_startup_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let n = Node::start(dir.path(), &["--save", ""]);
        let mut c = n.client();
        fill(&mut c, 500);
        let () = redis::cmd("SAVE").query(&mut c).unwrap();
    }
    let path = dir.path().join("dump.rdb");
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let err = Node::try_start(dir.path(), &["--save", ""])
        .err()
        .expect("start-up must fail");
    assert!(err.contains("dump.rdb"), "{err}");
    // Truncated: also refused.
    std::fs::write(&path, &bytes[..mid]).unwrap();
    let err = Node::try_start(dir.path(), &["--save", ""])
        .err()
        .expect("start-up must fail");
    assert!(err.contains("dump.rdb") && err.contains("offset"), "{err}");
}

#[test]
fn sigterm_saves_before_exiting_when_save_rules_are_set() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = Node::start(dir.path(), &["--save", "3600 1"]);
    let mut c = n.client();
    fill(&mut c, 1000);
    let before = digest(&mut c);
    Command::new("kill")
        .args(["-TERM", &n.child.id().to_string()])
        .status()
        .unwrap();
    let status = n.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), before);
}

#[test]
fn debug_reload_round_trips_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    fill(&mut c, 1000);
    let before = digest(&mut c);
    let () = redis::cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(digest(&mut c), before);
}

/// A snapshot whose bytes were damaged after it was written stops
/// start-up, on ferrokv as on redis-server 7.0, with Redis's words in the
/// log ("Wrong RDB checksum …", "RDB CRC error"), which log checks and
/// Redis's own tests wait for. Each server reads the file it wrote.
#[test]
fn a_corrupt_snapshot_stops_start_up_with_redis_s_crc_error() {
    for bin in [env!("CARGO_BIN_EXE_ferrokv-server"), "redis-server"] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        {
            let s = if bin == "redis-server" {
                ServerProcess::redis(&["--dir", d])
            } else {
                ServerProcess::ferrokv(&["--dir", d])
            };
            let mut c = s.client();
            let _: () = redis::cmd("SET")
                .arg("x")
                .arg("hello world value")
                .query(&mut c)
                .unwrap();
            let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
        }
        let path = dir.path().join("dump.rdb");
        let mut bytes = std::fs::read(&path).unwrap();
        let at = bytes
            .windows(5)
            .position(|w| w == b"hello")
            .expect("the value in the file");
        bytes[at] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let out = std::process::Command::new(bin)
            .args([
                "--port",
                &common::free_port().to_string(),
                "--dir",
                d,
                "--save",
                "",
            ])
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bin} started\n{log}");
        assert!(log.contains("Wrong RDB checksum"), "{bin}\n{log}");
        assert!(log.contains("RDB CRC error"), "{bin}\n{log}");
    }
}

/// FLUSHALL as Redis 7.0's flushAllDataAndResetRDB, on both servers: with
/// save rules the empty data set is saved at once (the counter back to 0,
/// and a restart does not bring the keys back), a BGSAVE under way stops
/// and BGSAVE is accepted again; without save rules the counter counts the
/// keys removed (Redis's unit/other.tcl "FLUSHALL should reset the dirty
/// counter ..." and "FLUSHALL and bgsave").
#[test]
fn flushall_saves_with_save_rules_and_stops_a_running_bgsave() {
    type Start = fn(&[&str]) -> ServerProcess;
    for start in [ServerProcess::ferrokv as Start, ServerProcess::redis] {
        let mut s = start(&[
            "--save",
            "3600 1 300 100 60 10000",
            "--rdb-key-save-delay",
            "0",
        ]);
        let mut c = s.client();
        let _: () = redis::cmd("SET")
            .arg("key")
            .arg("value")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        assert_eq!(
            persistence_field(&mut c, "rdb_changes_since_last_save"),
            "0",
            "{}",
            s.name
        );
        // A BGSAVE slowed down, then FLUSHALL: it stops, the save is made.
        for i in 0..20 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg(i)
                .query(&mut c)
                .unwrap();
        }
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("rdb-key-save-delay")
            .arg("1000000")
            .query(&mut c)
            .unwrap();
        let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("rdb-key-save-delay")
            .arg("0")
            .query(&mut c)
            .unwrap();
        common::wait_for("the BGSAVE to be gone", 20, || {
            (persistence_field(&mut c, "rdb_bgsave_in_progress") == "0").then_some(())
        });
        assert_eq!(
            persistence_field(&mut c, "rdb_changes_since_last_save"),
            "0",
            "{}",
            s.name
        );
        assert_eq!(
            persistence_field(&mut c, "rdb_last_bgsave_status"),
            "ok",
            "{}",
            s.name
        );
        let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
        assert_eq!(r, "Background saving started", "{}", s.name);
        common::wait_for("the BGSAVE", 20, || {
            (persistence_field(&mut c, "rdb_bgsave_in_progress") == "0").then_some(())
        });
        // A kill and a restart: the flushed keys stay flushed.
        let _: () = redis::cmd("SET")
            .arg("after")
            .arg("1")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        drop(c);
        s.kill_and_restart();
        let mut c = s.client();
        let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, 0, "{}", s.name);
        // Without save rules: the keys removed are the changes.
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("save")
            .arg("")
            .query(&mut c)
            .unwrap();
        let base: i64 = persistence_field(&mut c, "rdb_changes_since_last_save")
            .parse()
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg("key")
            .arg("value")
            .query(&mut c)
            .unwrap();
        let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
        assert_eq!(
            persistence_field(&mut c, "rdb_changes_since_last_save"),
            (base + 2).to_string(),
            "{}",
            s.name
        );
    }
}
