//! Guards loading what a real Redis wrote, and saving against a failing
//! disk: a `dump.rdb` saved by the real `redis-server` 7.0 (strings: integer,
//! LZF-compressed, binary and large values, expiries, several databases)
//! loads into ferrokv with the same `DEBUG DIGEST`; a snapshot whose write
//! fails never replaces the previous good file, writes are refused with
//! MISCONF while the last background save failed, and the next good save
//! clears it.
mod common;

use common::node::{digest, persistence_field, Node};
use common::ServerProcess;
use std::time::{Duration, Instant};

#[test]
fn dump_rdb_saved_by_real_redis_loads_with_the_same_digest() {
    let r = ServerProcess::redis(&[]);
    let mut rc = r.client();
    let mut p = redis::pipe();
    for i in 0..2000 {
        p.cmd("SET")
            .arg(format!("int:{i}"))
            .arg(i as i64 * 7919 - 5_000_000)
            .ignore();
        p.cmd("SET")
            .arg(format!("txt:{i}"))
            .arg(format!("{}-{i}", "compressible ".repeat(i % 20)))
            .ignore();
        if i % 3 == 0 {
            p.cmd("PEXPIRE")
                .arg(format!("txt:{i}"))
                .arg(50_000_000 + i)
                .ignore();
        }
    }
    p.cmd("SET")
        .arg(b"bin\x00\r\n\xff".as_slice())
        .arg((0..=255u8).collect::<Vec<u8>>())
        .ignore();
    p.cmd("SET").arg("big").arg("a".repeat(3_000_000)).ignore();
    p.cmd("SELECT").arg(9).ignore();
    p.cmd("SET").arg("in-db-9").arg("x").ignore();
    p.cmd("APPEND").arg("appended").arg("12").ignore();
    p.cmd("SELECT").arg(0).ignore();
    p.query::<()>(&mut rc).unwrap();
    let want = digest(&mut rc);
    let () = redis::cmd("SAVE").query(&mut rc).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(r.dir.path().join("dump.rdb"), dir.path().join("dump.rdb")).unwrap();
    let n = Node::start(dir.path(), &["--save", ""]);
    let mut c = n.client();
    assert_eq!(digest(&mut c), want);
}

#[test]
fn failed_background_save_keeps_the_old_file_refuses_writes_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(dir.path(), &["--save", "3600 1"]);
    let mut c = n.client();
    let () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    let () = redis::cmd("SAVE").query(&mut c).unwrap();
    let good = std::fs::read(dir.path().join("dump.rdb")).unwrap();
    let () = redis::cmd("SET").arg("b").arg("2").query(&mut c).unwrap();
    // The temp file of the next save is a full disk.
    let dirty: u64 = persistence_field(&mut c, "rdb_changes_since_last_save")
        .parse()
        .unwrap();
    let tmp = dir
        .path()
        .join(format!("temp-{}-{dirty}.rdb", n.child.id()));
    std::os::unix::fs::symlink("/dev/full", &tmp).unwrap();
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while persistence_field(&mut c, "rdb_bgsave_in_progress") == "1" {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(persistence_field(&mut c, "rdb_last_bgsave_status"), "err");
    assert_eq!(
        std::fs::read(dir.path().join("dump.rdb")).unwrap(),
        good,
        "a failed save replaced the good file"
    );
    let r: redis::RedisResult<()> = redis::cmd("SET").arg("c").arg("3").query(&mut c);
    assert!(r.unwrap_err().to_string().contains("MISCONF"));
    let v: String = redis::cmd("GET").arg("b").query(&mut c).unwrap();
    assert_eq!(v, "2", "reads are served");
    // The failed save removed its temp file (here, the link to the full disk).
    assert!(
        std::fs::symlink_metadata(&tmp).is_err(),
        "temp file left behind"
    );
    // The disk is fine again: the next save succeeds and writes are accepted.
    let _: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while persistence_field(&mut c, "rdb_last_bgsave_status") != "ok" {
        assert!(Instant::now() < deadline, "the save never succeeded");
        std::thread::sleep(Duration::from_millis(10));
    }
    let () = redis::cmd("SET").arg("c").arg("3").query(&mut c).unwrap();
}

#[test]
fn bgsave_schedule_and_debug_loadaof() {
    let dir = tempfile::tempdir().unwrap();
    let n = Node::start(
        dir.path(),
        &[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--rdb-key-save-delay",
            "1000",
        ],
    );
    let mut c = n.client();
    for i in 0..200 {
        let () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let r: String = redis::cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving started");
    let r: String = redis::cmd("BGSAVE").arg("SCHEDULE").query(&mut c).unwrap();
    assert_eq!(r, "Background saving scheduled");
    let before = digest(&mut c);
    let () = redis::cmd("DEBUG").arg("LOADAOF").query(&mut c).unwrap();
    assert_eq!(digest(&mut c), before);
}
