//! Guards the append-only file: with `appendfsync always` no write that got
//! a reply is lost when the process is killed at a random moment; the files
//! pass the real `redis-check-aof`; a rewrite loses nothing; a torn tail is
//! cut off with a warning while damage before the tail stops start-up; a
//! disk that refuses writes makes the server refuse writes (MISCONF), keep
//! serving reads, and recover with the disk; a power cut that drops every
//! unsynced byte (simulated through the `Storage` trait) still leaves every
//! acknowledged write with `always`.
mod common;

use common::memdisk::{MemStorage, PowerCutDisk};
use common::node::{digest, persistence_field, Node};
use common::{wait_for, ServerProcess};
use ferrokv_server::persistence::aof::{Aof, FsyncPolicy, Storage};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn check_aof(dir: &Path) {
    let manifest = dir.join("appendonlydir/appendonly.aof.manifest");
    let out = Command::new("redis-check-aof")
        .arg(&manifest)
        .output()
        .expect("redis-check-aof installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("are valid"), "{text}");
}

/// Writers that record what was acknowledged, killed with SIGKILL at a
/// random moment, several times over the same data directory.
#[test]
fn kill_9_with_appendfsync_always_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ];
    let mut acked: HashMap<String, String> = HashMap::new();
    let mut counter_acked = 0i64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // Four kills here; long runs: FERROKV_CRASH_ROUNDS=500 cargo test --test aof kill_9
    let rounds: usize = std::env::var("FERROKV_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    for round in 0..rounds {
        let mut node = Node::start(dir.path(), &args);
        // Everything acknowledged before is still there.
        {
            let mut c = node.client();
            // A kill between the log's write and its checksum record's
            // leaves bytes without a record, never a mismatch.
            if round > 0 {
                let v = persistence_field(&mut c, "aof_last_load_verification");
                assert!(v == "ok" || v == "unverified", "round {round}: {v}");
            }
            for (k, v) in &acked {
                let got: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
                assert_eq!(got.as_deref(), Some(v.as_str()), "round {round}: lost {k}");
            }
            let n: i64 = redis::cmd("GET")
                .arg("counter")
                .query::<Option<i64>>(&mut c)
                .unwrap()
                .unwrap_or(0);
            // At most one INCR was in flight (done, not acknowledged).
            assert!(
                n == counter_acked || n == counter_acked + 1,
                "round {round}: counter {n}, acked {counter_acked}"
            );
            counter_acked = n;
        }
        let port = node.port;
        let progress = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let results: Vec<_> = (0..3)
            .map(|w| {
                let progress = progress.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    let mut incrs = 0;
                    let Ok(mut c) = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                        .and_then(|c| c.get_connection())
                    else {
                        return (mine, incrs);
                    };
                    for i in 0.. {
                        let k = format!("r{round}w{w}k{i}");
                        let v = format!("v{i}-{}", "x".repeat(i % 40));
                        match redis::cmd("SET").arg(&k).arg(&v).query::<()>(&mut c) {
                            Ok(()) => mine.push((k, v)),
                            Err(_) => break,
                        }
                        progress.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if w == 0 {
                            match redis::cmd("INCR").arg("counter").query::<i64>(&mut c) {
                                Ok(_) => incrs += 1,
                                Err(_) => break,
                            }
                        }
                    }
                    (mine, incrs)
                })
            })
            .collect();
        // Kill at a random moment once the writers are under way (a loaded
        // machine may take a while to get them connected).
        wait_for("writers to get acknowledgements", 30, || {
            (progress.load(std::sync::atomic::Ordering::Relaxed) >= 50).then_some(())
        });
        std::thread::sleep(Duration::from_millis(rng.gen_range(50..300)));
        node.child.kill().unwrap();
        node.child.wait().unwrap();
        for r in results {
            let (mine, incrs) = r.join().unwrap();
            acked.extend(mine);
            counter_acked += incrs;
        }
    }
    let node = Node::start(dir.path(), &args);
    let mut c = node.client();
    let dbsize: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert!(dbsize >= acked.len(), "{dbsize} < {}", acked.len());
    for (k, v) in &acked {
        let got: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        assert_eq!(got.as_deref(), Some(v.as_str()), "lost {k}");
    }
    check_aof(dir.path());
    // And ferrokv's own check: every checksum matches.
    let out = Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
        .arg("--check-aof")
        .arg(dir.path().join("appendonlydir/appendonly.aof.manifest"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("AOF checksums are valid"),
        "{text}"
    );
}

#[test]
fn rewrite_during_writes_keeps_everything_and_files_pass_redis_check_aof() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--appendonly",
        "yes",
        "--save",
        "",
        "--rdb-key-save-delay",
        "50",
    ];
    let before;
    {
        let node = Node::start(dir.path(), &args);
        let mut c = node.client();
        for i in 0..3000 {
            let () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg(i)
                .query(&mut c)
                .unwrap();
        }
        let () = redis::cmd("PEXPIRE")
            .arg("k1")
            .arg(100_000_000)
            .query(&mut c)
            .unwrap();
        let reply: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        assert_eq!(reply, "Background append only file rewriting started");
        let mut i = 0;
        loop {
            let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
            if info.contains("aof_rewrite_in_progress:0") {
                assert!(info.contains("aof_rewrites:1"), "{info}");
                break;
            }
            let () = redis::cmd("SET")
                .arg(format!("k{}", i % 3000))
                .arg(format!("new{i}"))
                .query(&mut c)
                .unwrap();
            let () = redis::cmd("DEL")
                .arg(format!("k{}", (i + 7) % 3000))
                .query(&mut c)
                .unwrap();
            i += 1;
        }
        assert!(i > 10, "the rewrite ended before any write: {i}");
        before = digest(&mut c);
        // Only the new base and the incr started with the rewrite remain
        // (with the incr's checksum companion and the manifest).
        let mut files: Vec<String> = std::fs::read_dir(dir.path().join("appendonlydir"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            [
                "appendonly.aof.2.base.rdb",
                "appendonly.aof.2.incr.aof",
                "appendonly.aof.2.incr.aof.sum",
                "appendonly.aof.manifest"
            ],
            "{files:?}"
        );
    }
    check_aof(dir.path());
    let node = Node::start(dir.path(), &args);
    let mut c = node.client();
    assert_eq!(digest(&mut c), before);
}

fn incr_file(dir: &Path) -> PathBuf {
    let m = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap();
    let name = m
        .lines()
        .rev()
        .find(|l| l.contains("type i"))
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string();
    dir.join("appendonlydir").join(name)
}

#[test]
fn torn_tail_is_cut_off_and_damage_before_it_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--appendonly", "yes", "--save", ""];
    {
        let node = Node::start(dir.path(), &args);
        let mut c = node.client();
        for i in 0..100 {
            let () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg(i)
                .query(&mut c)
                .unwrap();
        }
        Command::new("kill")
            .args(["-TERM", &node.child.id().to_string()])
            .status()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    let incr = incr_file(dir.path());
    let good = std::fs::read(&incr).unwrap();
    // A command cut in the middle, as a crash during write() leaves it.
    let mut torn = good.clone();
    torn.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nlast\r\n$5\r\nva");
    std::fs::write(&incr, &torn).unwrap();
    {
        let node = Node::start(dir.path(), &args);
        let mut c = node.client();
        let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert_eq!(n, 100);
        assert_eq!(
            std::fs::read(&incr).unwrap(),
            good,
            "the torn tail must be cut from the file"
        );
    }
    // Damage in the middle: start-up refuses, naming the file and offset.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    let at = mid
        + bad[mid..]
            .windows(4)
            .position(|w| w == b"*3\r\n")
            .expect("a command after the middle");
    bad[at] = b'#';
    std::fs::write(&incr, &bad).unwrap();
    let err = Node::try_start(dir.path(), &args)
        .err()
        .expect("start-up must fail");
    assert!(
        err.contains("appendonly.aof") && err.contains("offset"),
        "{err}"
    );
}

#[test]
fn failing_disk_refuses_writes_serves_reads_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--appendonly", "yes", "--save", ""];
    let node = Node::start(dir.path(), &args);
    let mut c = node.client();
    let () = redis::cmd("SET")
        .arg("before")
        .arg("1")
        .query(&mut c)
        .unwrap();
    // The next incremental file (the rewrite opens it by name) is a full disk.
    let next = dir.path().join("appendonlydir/appendonly.aof.2.incr.aof");
    std::os::unix::fs::symlink("/dev/full", &next).unwrap();
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    // This write is applied in memory but cannot reach the disk: its reply
    // must not come while the disk fails.
    let port = node.port;
    let pending = std::thread::spawn(move || {
        let mut c2 = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let r: redis::RedisResult<()> = redis::cmd("SET").arg("during").arg("2").query(&mut c2);
        (r, Instant::now())
    });
    // The failure shows in INFO (reads are served)...
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(&mut c).unwrap();
        if info.contains("aof_last_write_status:err") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the write error never showed: {info}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // ...and further writes are refused, not queued.
    let r: redis::RedisResult<()> = redis::cmd("SET").arg("x").arg("y").query(&mut c);
    assert!(r.unwrap_err().to_string().contains("MISCONF"));
    let v: String = redis::cmd("GET").arg("before").query(&mut c).unwrap();
    assert_eq!(v, "1", "reads are still served");
    assert!(
        !pending.is_finished(),
        "an unpersisted write was acknowledged"
    );
    // The disk recovers.
    let fixed_at = Instant::now();
    std::fs::remove_file(&next).unwrap();
    std::fs::write(&next, b"").unwrap();
    let (r, answered_at) = pending.join().unwrap();
    r.unwrap();
    assert!(answered_at >= fixed_at);
    let deadline = Instant::now() + Duration::from_secs(10);
    while redis::cmd("SET")
        .arg("after")
        .arg("3")
        .query::<()>(&mut c)
        .is_err()
    {
        assert!(Instant::now() < deadline, "writes never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(c);
    drop(node);
    let node = Node::start(dir.path(), &args);
    let mut c = node.client();
    for k in ["before", "during", "after"] {
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
        assert!(v.is_some(), "{k} lost");
    }
}

/// Drives the AOF writer itself through the fault-injecting storage: every
/// command whose flush returned (the moment the server would reply) must
/// survive the cut with `always`; with `everysec`, what was written more than
/// about a second before the cut survives; the files always load.
#[test]
fn power_cut_keeps_acknowledged_writes() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::EverySec] {
        let disk = Arc::new(PowerCutDisk::default());
        let storage: Arc<dyn Storage> = Arc::new(MemStorage(disk.clone()));
        let vdir = PathBuf::from("/virtual/appendonlydir");
        let mut aof = Aof::open(
            storage,
            &vdir,
            "appendonly.aof",
            policy,
            None,
            &ferrokv_server::server::empty_rdb(),
        )
        .unwrap();
        let mut acked = Vec::new();
        for i in 0..500 {
            let k = format!("k{i}");
            aof.feed(0, &[b"SET".as_slice(), k.as_bytes(), b"v"]);
            aof.flush().unwrap();
            acked.push(k);
        }
        if policy == FsyncPolicy::EverySec {
            // Older than a second by the cut: synced by the helper thread.
            std::thread::sleep(Duration::from_millis(2100));
        }
        // Unsynced at the cut (with everysec): may be lost.
        for i in 0..50 {
            aof.feed(0, &[b"SET".as_slice(), format!("late{i}").as_bytes(), b"v"]);
            aof.flush().unwrap();
            if policy == FsyncPolicy::Always {
                acked.push(format!("late{i}"));
            }
        }
        let real = tempfile::tempdir().unwrap();
        disk.survive_into(real.path());
        drop(aof);
        let node = Node::start(real.path(), &["--appendonly", "yes", "--save", ""]);
        let mut c = node.client();
        for k in &acked {
            let v: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
            assert_eq!(v.as_deref(), Some("v"), "{policy:?}: {k} lost");
        }
    }
}

/// The AOF's commands, one per line, arguments joined by spaces (the
/// file's RESP parsed).
fn aof_commands(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    let line = |i: &mut usize| -> String {
        let j = *i + text[*i..].find("\r\n").unwrap();
        let s = text[*i + 1..j].to_string();
        *i = j + 2;
        s
    };
    while i < b.len() {
        let n: usize = line(&mut i).parse().unwrap();
        let mut args = Vec::new();
        for _ in 0..n {
            let len: usize = line(&mut i).parse().unwrap();
            args.push(text[i..i + len].to_string());
            i += len + 2;
        }
        out.push(args.join(" "));
    }
    out
}

#[test]
fn keys_found_expired_propagate_as_redis_7_0_writes_them() {
    // The DELs of the keys one command found expired go with it as one
    // unit: wrapped in MULTI/EXEC when there are several, except for
    // SCAN and RANDOMKEY, whose DELs go bare (as active expiry's do).
    let run = |p: &ServerProcess| -> Vec<String> {
        let mut r = p.raw();
        r.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
        for c in [
            &["MGET", "a", "b"][..],
            &["EXISTS", "a"],
            &["SCAN", "0"],
            &["DEL", "a", "b"],
        ] {
            r.cmd(&["SET", "a", "1", "PX", "1"]);
            r.cmd(&["SET", "b", "1", "PX", "1"]);
            std::thread::sleep(Duration::from_millis(20));
            r.cmd(c);
            // The SETs themselves (and what they find) are not compared.
            r.cmd(&["DEL", "a", "b"]);
            r.cmd(&["SET", "marker", &c.join("_")]);
        }
        // A SET over an expired key deletes it first, in the same unit.
        r.cmd(&["SET", "w", "1", "PX", "1"]);
        std::thread::sleep(Duration::from_millis(20));
        r.cmd(&["SET", "w", "2"]);
        let mut cmds: Vec<String> = aof_commands(&common::aof_text(p))
            .into_iter()
            .filter(|c| {
                !c.to_ascii_lowercase().starts_with("set a ")
                    && !c.to_ascii_lowercase().starts_with("set b ")
            })
            .collect();
        // SCAN meets the keys in each server's own table order.
        // Absolute times differ between the runs.
        for c in cmds.iter_mut() {
            if let Some(at) = c.find(" PXAT ") {
                c.truncate(at + 5);
            }
        }
        let i = cmds.iter().position(|c| c == "SET marker SCAN_0").unwrap();
        cmds[i - 2..i].sort();
        cmds
    };
    let ours = run(&ServerProcess::ferrokv(&[
        "--appendonly",
        "yes",
        "--enable-debug-command",
        "yes",
    ]));
    let redis = run(&ServerProcess::redis(&["--appendonly", "yes"]));
    assert_eq!(ours, redis);
    assert!(ours.iter().any(|c| c == "MULTI"), "{ours:?}");
}

/// A damaged manifest stops start-up, on ferrokv as on redis-server 7.0,
/// with Redis's words in the log: two base files, incremental files whose
/// sequence numbers do not increase (a duplicate included), a blank line,
/// a file the manifest names that is missing. A sound manifest over the
/// same files loads. Both binaries run over copies of each directory.
#[test]
fn damaged_manifests_are_refused_at_start_up_as_redis_refuses_them() {
    const BASE: &str = "appendonly.aof.1.base.aof";
    let set = |k: &str| {
        format!(
            "*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n$1\r\nv\r\n",
            k.len()
        )
    };
    let cases: &[(&str, &str, Option<&str>)] = &[
        (
            "two bases",
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.2.base.aof seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
            Some("Found duplicate base file information"),
        ),
        (
            "decreasing",
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.2.incr.aof seq 2 type i\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
            Some("Found a non-monotonic sequence number"),
        ),
        (
            "duplicate",
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
            Some("Found a non-monotonic sequence number"),
        ),
        (
            "blank line",
            "file appendonly.aof.1.base.aof seq 1 type b\n\nfile appendonly.aof.1.incr.aof seq 1 type i\n",
            Some("Invalid AOF manifest file format"),
        ),
        (
            "missing file",
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.9.incr.aof seq 9 type i\n",
            Some("appendonly.aof.9.incr.aof"),
        ),
        (
            "sound",
            "file appendonly.aof.1.base.aof seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n",
            None,
        ),
    ];
    for (what, manifest, refusal) in cases {
        for bin in [env!("CARGO_BIN_EXE_ferrokv-server"), "redis-server"] {
            let dir = tempfile::tempdir().unwrap();
            let aof = dir.path().join("appendonlydir");
            std::fs::create_dir_all(&aof).unwrap();
            std::fs::write(aof.join("appendonly.aof.manifest"), manifest).unwrap();
            std::fs::write(aof.join(BASE), set("k")).unwrap();
            std::fs::write(aof.join("appendonly.aof.2.base.aof"), set("k")).unwrap();
            for n in 1..=2 {
                std::fs::write(
                    aof.join(format!("appendonly.aof.{n}.incr.aof")),
                    set(&format!("j{n}")),
                )
                .unwrap();
            }
            match refusal {
                Some(words) => {
                    // Refused: the process exits by itself, non-zero.
                    let out = Command::new(bin)
                        .args(["--port", &common::free_port().to_string()])
                        .args(["--dir", dir.path().to_str().unwrap()])
                        .args(["--appendonly", "yes", "--save", ""])
                        .output()
                        .unwrap();
                    let log = String::from_utf8_lossy(&out.stdout).into_owned()
                        + &String::from_utf8_lossy(&out.stderr);
                    assert!(!out.status.success(), "{bin}, {what}: started\n{log}");
                    assert!(log.contains(words), "{bin}, {what}: no '{words}' in\n{log}");
                }
                None => {
                    let s = if bin == "redis-server" {
                        ServerProcess::redis(&[
                            "--dir",
                            dir.path().to_str().unwrap(),
                            "--appendonly",
                            "yes",
                        ])
                    } else {
                        ServerProcess::ferrokv(&[
                            "--dir",
                            dir.path().to_str().unwrap(),
                            "--appendonly",
                            "yes",
                        ])
                    };
                    let mut c = s.client();
                    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
                    assert_eq!(n, 3, "{bin}, {what}");
                }
            }
        }
    }
}

/// `BGREWRITEAOF` with `appendonly no`, as Redis 7.0: a base and a
/// manifest naming it alone (the previous base deleted at the second
/// rewrite), which a later start with `appendonly yes` loads — ours and a
/// real redis-server, each reading the files the other wrote too. Turning
/// `appendonly yes` on while such a rewrite runs stops it.
#[test]
fn bgrewriteaof_with_the_aof_off_writes_files_a_later_appendonly_yes_loads() {
    type Start = fn(&[&str]) -> ServerProcess;
    let servers: [(Start, &str); 2] = [
        (ServerProcess::ferrokv, "ferrokv"),
        (ServerProcess::redis, "redis"),
    ];
    for (writer, wname) in servers {
        for (reader, rname) in servers {
            let data = tempfile::tempdir().unwrap();
            let d = data.path().to_str().unwrap();
            let s = writer(&["--dir", d, "--appendonly", "no", "--save", ""]);
            let mut c = s.client();
            let rewrite = |c: &mut redis::Connection, n: &str| {
                let r: String = redis::cmd("BGREWRITEAOF").query(c).unwrap();
                assert_eq!(r, "Background append only file rewriting started");
                wait_for("the rewrite", 20, || {
                    (persistence_field(c, "aof_rewrites") == n
                        && persistence_field(c, "aof_rewrite_in_progress") == "0")
                        .then_some(())
                });
            };
            let _: () = redis::cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
            rewrite(&mut c, "1");
            let _: () = redis::cmd("SET").arg("b").arg("2").query(&mut c).unwrap();
            rewrite(&mut c, "2");
            assert_eq!(persistence_field(&mut c, "aof_enabled"), "0");
            let adir = data.path().join("appendonlydir");
            let manifest = std::fs::read_to_string(adir.join("appendonly.aof.manifest")).unwrap();
            assert_eq!(
                manifest, "file appendonly.aof.2.base.rdb seq 2 type b\n",
                "{wname}"
            );
            let mut files: Vec<String> = std::fs::read_dir(&adir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            assert_eq!(
                files,
                ["appendonly.aof.2.base.rdb", "appendonly.aof.manifest"],
                "{wname}"
            );
            check_aof(data.path());
            drop(c);
            drop(s);
            let r = reader(&["--dir", d, "--appendonly", "yes", "--save", ""]);
            let mut c = r.client();
            let v: Vec<Option<String>> =
                redis::cmd("MGET").arg("a").arg("b").query(&mut c).unwrap();
            assert_eq!(
                v,
                [Some("1".to_string()), Some("2".to_string())],
                "{wname} -> {rname}: {}",
                r.log()
            );
        }
    }
    // appendonly yes while an AOF-off rewrite runs (slowed down): it stops
    // and the new AOF's own rewrite follows, which holds the data.
    let data = tempfile::tempdir().unwrap();
    let d = data.path().to_str().unwrap();
    let s = ServerProcess::ferrokv(&["--dir", d, "--save", "", "--rdb-key-save-delay", "20000"]);
    let mut c = s.client();
    for i in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    assert_eq!(persistence_field(&mut c, "aof_rewrite_in_progress"), "1");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdb-key-save-delay")
        .arg("0")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendonly")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    assert!(
        s.log()
            .contains("Stopping background AOF and starting a rewrite now"),
        "{}",
        s.log()
    );
    wait_for("the new AOF's rewrite", 20, || {
        (persistence_field(&mut c, "aof_rewrites") == "1"
            && persistence_field(&mut c, "aof_rewrite_in_progress") == "0")
            .then_some(())
    });
    drop(c);
    drop(s);
    let s = ServerProcess::ferrokv(&["--dir", d, "--save", "", "--appendonly", "yes"]);
    let mut c = s.client();
    let n: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 100, "{}", s.log());
}

/// `appendonly no` while a rewrite runs stops it, as Redis 7.0 kills its
/// rewrite child (and says so in its log), on both servers.
#[test]
fn turning_the_aof_off_stops_a_running_rewrite() {
    type Start = fn(&[&str]) -> ServerProcess;
    for start in [ServerProcess::ferrokv as Start, ServerProcess::redis] {
        let s = start(&[
            "--appendonly",
            "yes",
            "--save",
            "",
            "--rdb-key-save-delay",
            "100000",
        ]);
        let mut c = s.client();
        for i in 0..100 {
            let _: () = redis::cmd("SET")
                .arg(format!("k{i}"))
                .arg(i)
                .query(&mut c)
                .unwrap();
        }
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        wait_for("the rewrite to run", 10, || {
            (persistence_field(&mut c, "aof_rewrite_in_progress") == "1").then_some(())
        });
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("appendonly")
            .arg("no")
            .query(&mut c)
            .unwrap();
        wait_for("the rewrite to stop", 10, || {
            (persistence_field(&mut c, "aof_rewrite_in_progress") == "0").then_some(())
        });
        assert!(
            s.log().contains("Killing running AOF rewrite child"),
            "{}",
            s.log()
        );
        assert_eq!(
            persistence_field(&mut c, "aof_rewrites_consecutive_failures"),
            "0"
        );
    }
}
