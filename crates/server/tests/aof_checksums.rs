//! Guards the AOF's checksum companions (issue #26): silent damage to an
//! incremental file — a flipped bit inside a value, zeroed pages in the
//! middle, injected through the `Storage` trait or edited on disk — stops
//! start-up naming the file and the offset of the damaged block (which
//! `ferrokv-server --check-aof` reports too, where `redis-check-aof` sees a
//! valid file), and `aof-load-from-last-verified` starts from the last
//! verified point; a truncated companion and one from another file are
//! recognised; a torn last block is cut as a torn tail; a power cut with
//! `always` loses nothing acknowledged and verifies clean; the rewrite and
//! DEBUG LOADAOF keep the companions consistent; a real redis-server 7.0
//! loads the directory ferrokv wrote, and a directory real Redis wrote
//! loads into ferrokv unchanged.
mod common;

use common::memdisk::{Fault, FaultKind, MemStorage, PowerCutDisk};
use common::node::{digest, persistence_field, Node};
use common::{metric_value, scrape_metrics, wait_for, ServerProcess};
use ferrokv_server::persistence::aof::{Aof, FsyncPolicy, Storage};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const ALWAYS: &[&str] = &[
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--save",
    "",
];
const EVERYSEC: &[&str] = &[
    "--appendonly",
    "yes",
    "--appendfsync",
    "everysec",
    "--save",
    "",
];

/// A block record of a companion, read by this test's own parser of the
/// format (docs/aof-checksums.md): offset, length, first command, commands.
#[derive(Debug, Clone, Copy)]
struct Rec {
    offset: u64,
    len: u64,
    first_cmd: u64,
    cmds: u32,
}

impl Rec {
    fn end(&self) -> u64 {
        self.offset + self.len
    }
}

fn header_len(sum: &[u8]) -> usize {
    assert_eq!(&sum[..8], b"FKVAOFS1");
    16 + u32::from_le_bytes(sum[12..16].try_into().unwrap()) as usize + 8
}

fn records(sum: &[u8]) -> Vec<Rec> {
    let h = header_len(sum);
    sum[h..]
        .chunks_exact(40)
        .map(|r| Rec {
            offset: u64::from_le_bytes(r[0..8].try_into().unwrap()),
            len: u64::from_le_bytes(r[8..16].try_into().unwrap()),
            first_cmd: u64::from_le_bytes(r[16..24].try_into().unwrap()),
            cmds: u32::from_le_bytes(r[24..28].try_into().unwrap()),
        })
        .collect()
}

fn manifest(dir: &Path) -> PathBuf {
    dir.join("appendonlydir/appendonly.aof.manifest")
}

/// The last incremental file the manifest names, and its companion.
fn last_incr(dir: &Path) -> (PathBuf, Option<PathBuf>) {
    let m = std::fs::read_to_string(manifest(dir)).unwrap();
    let line = m.lines().rev().find(|l| l.contains("type i")).unwrap();
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = |k: &str| {
        words
            .iter()
            .position(|w| *w == k)
            .map(|i| dir.join("appendonlydir").join(words[i + 1]))
    };
    (at("file").unwrap(), at("ferrokv-sum"))
}

/// `ferrokv-server --check-aof`: (exit code, stdout).
fn check_tool(dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrokv-server"))
        .arg("--check-aof")
        .arg(manifest(dir))
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn redis_check_aof(dir: &Path) -> String {
    let out = Command::new("redis-check-aof")
        .arg(manifest(dir))
        .output()
        .expect("redis-check-aof installed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// SETs of `k{i}` to `value(i)`, `per_turn` to a pipeline.
fn write_keys(c: &mut redis::Connection, from: usize, to: usize, per_turn: usize) {
    let mut i = from;
    while i < to {
        let mut p = redis::pipe();
        for j in i..(i + per_turn).min(to) {
            p.cmd("SET").arg(format!("k{j}")).arg(value(j)).ignore();
        }
        p.query::<()>(c).unwrap();
        i += per_turn;
    }
}

fn value(i: usize) -> String {
    format!("val-{i}-{}", "abcdefghij".repeat(20 + i % 7))
}

/// SHUTDOWN (the AOF is synced, the open block closed) and wait.
fn stop(mut node: Node) {
    let mut c = node.client();
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut c);
    node.child.wait().unwrap();
}

fn dbsize(c: &mut redis::Connection) -> usize {
    redis::cmd("DBSIZE").query(c).unwrap()
}

/// The record covering offset `at`.
fn block_at(recs: &[Rec], at: u64) -> Rec {
    *recs
        .iter()
        .find(|r| r.offset <= at && at < r.end())
        .expect("a block covers the offset")
}

#[test]
fn a_flipped_bit_inside_a_value_stops_startup_at_its_block() {
    let dir = tempfile::tempdir().unwrap();
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 400, 8);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    let sum = sum.expect("the manifest names a companion");
    let mut data = std::fs::read(&incr).unwrap();
    let recs = records(&std::fs::read(&sum).unwrap());
    assert!(recs.len() >= 50, "one block per pipeline: {}", recs.len());
    assert_eq!(recs.last().unwrap().end(), data.len() as u64);
    // Every command once: a SELECT and the 400 SETs.
    assert_eq!(recs.iter().map(|r| r.cmds as u64).sum::<u64>(), 401);
    // One bit of k200's value.
    let needle = value(200);
    let at = data
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap()
        + 30;
    data[at] ^= 0x04;
    std::fs::write(&incr, &data).unwrap();
    let bad = block_at(&recs, at as u64);
    // Redis's own check sees a valid file: the framing is intact.
    assert!(
        redis_check_aof(dir.path()).contains("is valid"),
        "{}",
        redis_check_aof(dir.path())
    );
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 1, "{report}");
    assert!(
        report.contains(&format!(
            "FIRST BAD BLOCK: checksum mismatch in appendonly.aof.1.incr.aof at offset {} in a block before the end",
            bad.offset
        )),
        "{report}"
    );
    let log = Node::try_start(dir.path(), ALWAYS)
        .err()
        .expect("start-up must stop");
    assert!(
        log.contains(&format!(
            "checksum mismatch in appendonly.aof.1.incr.aof at offset {}",
            bad.offset
        )) && log.contains(&format!("the last verified point is offset {}", bad.offset)),
        "{log}"
    );
    // The last good command: the one before the block (#first_cmd, from 1).
    assert!(
        log.contains(&format!("the last verified command is #{}", bad.first_cmd)),
        "{log}"
    );
    // Starting from the last verified point instead.
    let mut args = ALWAYS.to_vec();
    args.extend(["--aof-load-from-last-verified", "yes"]);
    let node = Node::start(dir.path(), &args);
    let mut c = node.client();
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "recovered"
    );
    // The commands before the block (a SELECT first), every one intact.
    let kept = bad.first_cmd as usize - 1;
    assert_eq!(dbsize(&mut c), kept);
    for i in [0, kept - 1] {
        let v: String = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(v, value(i));
    }
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), bad.offset);
    let aside = incr.with_file_name(format!("appendonly.aof.1.incr.aof.corrupt-{}", bad.offset));
    assert_eq!(
        std::fs::read(&aside).unwrap(),
        &data[bad.offset as usize..],
        "the cut bytes are kept aside"
    );
    // Appends go on, verified.
    write_keys(&mut c, 1000, 1010, 5);
    drop(c);
    stop(node);
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
    assert!(!report.contains("no checksum record"), "{report}");
}

#[test]
fn zeroed_pages_in_the_middle_stop_startup_at_their_block() {
    let dir = tempfile::tempdir().unwrap();
    {
        // everysec: blocks of 64 KiB, closed by size and by the cron.
        let node = Node::start(dir.path(), EVERYSEC);
        let mut c = node.client();
        write_keys(&mut c, 0, 5000, 50);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    let mut data = std::fs::read(&incr).unwrap();
    let recs = records(&std::fs::read(sum.unwrap()).unwrap());
    assert!(recs.len() >= 4, "{recs:?}");
    assert_eq!(recs.last().unwrap().end(), data.len() as u64);
    // Two pages of zeros, page-aligned, in the middle of the file.
    let at = (data.len() / 2) & !4095;
    data[at..at + 8192].fill(0);
    std::fs::write(&incr, &data).unwrap();
    let bad = block_at(&recs, at as u64);
    let log = Node::try_start(dir.path(), EVERYSEC)
        .err()
        .expect("start-up must stop");
    assert!(
        log.contains(&format!(
            "checksum mismatch in appendonly.aof.1.incr.aof at offset {}",
            bad.offset
        )),
        "{log}"
    );
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 1);
    assert!(
        report.contains(&format!(
            "at offset {} in a block before the end",
            bad.offset
        )),
        "{report}"
    );
}

#[test]
fn a_truncated_companion_leaves_the_rest_unverified_from_its_last_whole_record() {
    let dir = tempfile::tempdir().unwrap();
    let want;
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 200, 10);
        want = digest(&mut c);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    let sum = sum.unwrap();
    let bytes = std::fs::read(&sum).unwrap();
    let recs = records(&bytes);
    let len = std::fs::metadata(&incr).unwrap().len();
    // Cut in the middle of the sixth record.
    let cut = header_len(&bytes) + 5 * 40 + 17;
    std::fs::write(&sum, &bytes[..cut]).unwrap();
    let covered = recs[4].end();
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
    assert!(
        report.contains(&format!("ok, {covered} bytes in 5 blocks verified"))
            && report.contains(&format!(
                "the last {} bytes (from offset {covered}) have no checksum record",
                len - covered
            ))
            && report
                .contains("appendonly.aof.1.incr.aof.sum ends with 17 bytes of a record cut short"),
        "{report}"
    );
    let node = Node::start(dir.path(), ALWAYS);
    let mut c = node.client();
    assert_eq!(digest(&mut c), want);
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "unverified"
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verified_blocks"),
        "5"
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_unverified_bytes"),
        (len - covered).to_string()
    );
    drop(c);
    stop(node);
    // The server recorded the rest again when it opened the file.
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
    assert!(!report.contains("no checksum record"), "{report}");
}

#[test]
fn a_companion_from_another_file_is_recognised() {
    // A: a rewrite gives it appendonly.aof.2.incr.aof and its companion.
    let a = tempfile::tempdir().unwrap();
    {
        let node = Node::start(a.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 100, 10);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        wait_for("the rewrite", 20, || {
            (persistence_field(&mut c, "aof_rewrites") == "1").then_some(())
        });
        write_keys(&mut c, 100, 200, 10);
        stop(node);
    }
    // B and C: appendonly.aof.1.incr.aof each, different data.
    let b = tempfile::tempdir().unwrap();
    let c_dir = tempfile::tempdir().unwrap();
    for (d, from) in [(&b, 0), (&c_dir, 5000)] {
        let node = Node::start(d.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, from, from + 300, 10);
        stop(node);
    }
    let (_, b_sum) = last_incr(b.path());
    let b_sum = b_sum.unwrap();
    let good = std::fs::read(&b_sum).unwrap();
    // Another file's companion, under this file's companion name.
    let (_, a_sum) = last_incr(a.path());
    std::fs::copy(a_sum.unwrap(), &b_sum).unwrap();
    let log = Node::try_start(b.path(), ALWAYS)
        .err()
        .expect("start-up must stop");
    assert!(
        log.contains("is unusable at its offset 16: it is the checksum file of appendonly.aof.2.incr.aof, not of appendonly.aof.1.incr.aof"),
        "{log}"
    );
    let (code, report) = check_tool(b.path());
    assert_eq!(code, 1);
    assert!(report.contains("unusable at its offset 16"), "{report}");
    // The same name, from another directory: its first block mismatches.
    let (_, c_sum) = last_incr(c_dir.path());
    std::fs::copy(c_sum.unwrap(), &b_sum).unwrap();
    let log = Node::try_start(b.path(), ALWAYS)
        .err()
        .expect("start-up must stop");
    assert!(
        log.contains("checksum mismatch in appendonly.aof.1.incr.aof at offset 0"),
        "{log}"
    );
    // The right companion back: it loads.
    std::fs::write(&b_sum, &good).unwrap();
    let node = Node::start(b.path(), ALWAYS);
    let mut c = node.client();
    assert_eq!(dbsize(&mut c), 300);
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "ok"
    );
}

#[test]
fn a_torn_last_block_is_cut_as_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 100, 10);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    let recs = records(&std::fs::read(sum.unwrap()).unwrap());
    let last = *recs.last().unwrap();
    // The file ends inside its last block, as a crash during the write
    // leaves it (whole commands of the block included).
    let data = std::fs::read(&incr).unwrap();
    let torn = last.offset as usize + (last.len as usize) * 2 / 3;
    std::fs::write(&incr, &data[..torn]).unwrap();
    let mut strict = ALWAYS.to_vec();
    strict.extend(["--aof-load-truncated", "no"]);
    let log = Node::try_start(dir.path(), &strict).err().expect("refused");
    assert!(
        log.contains(&format!(
            "checksum mismatch in appendonly.aof.1.incr.aof at offset {} in the last block (a torn write)",
            last.offset
        )),
        "{log}"
    );
    let node = Node::start(dir.path(), ALWAYS);
    let mut c = node.client();
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "truncated"
    );
    // The block's commands are gone (a SELECT came first), the rest is there.
    assert_eq!(dbsize(&mut c), last.first_cmd as usize - 1);
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), last.offset);
}

/// The AOF writer driven through the fault-injecting storage: with
/// `always`, every command whose flush returned survives a power cut and
/// the files verify clean; a bit flipped or a page zeroed by the disk
/// (the writer is not told) stops start-up at the block that holds it.
#[test]
fn power_cut_with_always_verifies_clean_and_injected_damage_is_found() {
    for fault in [
        None,
        Some(FaultKind::FlipBits(0x20)),
        Some(FaultKind::Zero(4096)),
    ] {
        let disk = Arc::new(PowerCutDisk::default());
        let storage: Arc<dyn Storage> = Arc::new(MemStorage(disk.clone()));
        let vdir = PathBuf::from("/virtual/appendonlydir");
        let incr = vdir.join("appendonly.aof.1.incr.aof");
        let mut aof = Aof::open(
            storage,
            &vdir,
            "appendonly.aof",
            FsyncPolicy::Always,
            None,
            &ferrokv_server::server::empty_rdb(),
        )
        .unwrap();
        // Where the damage goes: inside flush number 100's bytes.
        let mut flush_ends = vec![0usize];
        let mut acked = Vec::new();
        for turn in 0..300 {
            if turn == 100 {
                if let Some(kind) = fault {
                    let at = flush_ends[100] + 40;
                    disk.faults.lock().unwrap().push(Fault {
                        file_suffix: ".incr.aof".into(),
                        at,
                        kind,
                    });
                }
            }
            for j in 0..4 {
                let k = format!("t{turn}k{j}");
                aof.feed(
                    0,
                    &[b"SET".as_slice(), k.as_bytes(), value(turn).as_bytes()],
                );
                acked.push(k);
            }
            aof.flush().unwrap();
            flush_ends.push(disk.files.lock().unwrap()[&incr].0.len());
        }
        let real = tempfile::tempdir().unwrap();
        disk.survive_into(real.path());
        drop(aof);
        let (code, report) = check_tool(real.path());
        match fault {
            None => {
                assert_eq!(code, 0, "{report}");
                assert!(
                    report.contains(&format!(
                        "ok, {} bytes in 300 blocks verified (1201 commands)",
                        flush_ends[300]
                    )),
                    "{report}"
                );
                let node = Node::start(real.path(), ALWAYS);
                let mut c = node.client();
                for k in &acked {
                    let v: Option<String> = redis::cmd("GET").arg(k).query(&mut c).unwrap();
                    assert!(v.is_some(), "{k} lost");
                }
                assert_eq!(
                    persistence_field(&mut c, "aof_last_load_verification"),
                    "ok"
                );
                assert_eq!(
                    persistence_field(&mut c, "aof_last_load_verified_bytes"),
                    flush_ends[300].to_string()
                );
                assert_eq!(
                    persistence_field(&mut c, "aof_last_load_verified_blocks"),
                    "300"
                );
            }
            Some(kind) => {
                assert_eq!(code, 1, "{kind:?}: {report}");
                // The zeroed page spans several flushes: the first is bad.
                let want = format!(
                    "checksum mismatch in appendonly.aof.1.incr.aof at offset {} in a block before the end",
                    flush_ends[100]
                );
                assert!(report.contains(&want), "{kind:?}: {report}");
                let log = Node::try_start(real.path(), ALWAYS)
                    .err()
                    .expect("start-up must stop");
                assert!(log.contains(&want), "{kind:?}: {log}");
            }
        }
    }
}

#[test]
fn rewrite_and_debug_loadaof_keep_the_companions_consistent_and_info_and_metrics_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = EVERYSEC.to_vec();
    args.extend(["--rdb-key-save-delay", "100"]);
    {
        let node = Node::start(dir.path(), &args);
        let mut c = node.client();
        write_keys(&mut c, 0, 1000, 20);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        let mut i = 0;
        while persistence_field(&mut c, "aof_rewrite_in_progress") == "1" {
            write_keys(&mut c, 2000 + i * 10, 2010 + i * 10, 5);
            i += 1;
        }
        assert!(i > 3, "the rewrite ended before writes: {i}");
        assert_eq!(persistence_field(&mut c, "aof_rewrites"), "1");
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
            ]
        );
        let before = digest(&mut c);
        let () = redis::cmd("DEBUG").arg("LOADAOF").query(&mut c).unwrap();
        assert_eq!(digest(&mut c), before);
        let (incr, _) = last_incr(dir.path());
        let len = std::fs::metadata(&incr).unwrap().len();
        assert_eq!(
            persistence_field(&mut c, "aof_last_load_verification"),
            "ok"
        );
        assert_eq!(
            persistence_field(&mut c, "aof_last_load_verified_bytes"),
            len.to_string()
        );
        stop(node);
    }
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
    assert!(redis_check_aof(dir.path()).contains("are valid"));
    let (incr, sum) = last_incr(dir.path());
    let len = std::fs::metadata(&incr).unwrap().len();
    let blocks = records(&std::fs::read(sum.unwrap()).unwrap()).len();
    let mport = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut margs = args.clone();
    margs.extend(["--metrics-port", &mport]);
    let node = Node::start(dir.path(), &margs);
    let mut c = node.client();
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "ok"
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verified_bytes"),
        len.to_string()
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verified_blocks"),
        blocks.to_string()
    );
    assert_eq!(persistence_field(&mut c, "aof_checksums"), "1");
    let text = wait_for("metrics", 10, || {
        let t = scrape_metrics(mport.parse().unwrap());
        t.contains("ferrokv_aof_last_load_verified_bytes")
            .then_some(t)
    });
    assert_eq!(
        metric_value(&text, "ferrokv_aof_last_load_verified_bytes").as_deref(),
        Some(len.to_string().as_str())
    );
    assert_eq!(
        metric_value(&text, "ferrokv_aof_last_load_verified_blocks").as_deref(),
        Some(blocks.to_string().as_str())
    );
    assert_eq!(
        metric_value(&text, "ferrokv_aof_last_load_verification").as_deref(),
        Some("1")
    );
    // Writes now get blocks within the cron period (everysec).
    write_keys(&mut c, 9000, 9010, 10);
    wait_for("a block written", 5, || {
        let t = scrape_metrics(mport.parse().unwrap());
        (metric_value(&t, "ferrokv_aof_checksum_blocks_written_total").as_deref() != Some("0"))
            .then_some(())
    });
    assert_ne!(
        persistence_field(&mut c, "aof_checksum_blocks_written"),
        "0"
    );
}

#[test]
fn real_redis_loads_the_directory_ferrokv_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let want;
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 300, 10);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
        wait_for("the rewrite", 20, || {
            (persistence_field(&mut c, "aof_rewrites") == "1").then_some(())
        });
        write_keys(&mut c, 300, 600, 10);
        let () = redis::cmd("HSET")
            .arg("h")
            .arg("f")
            .arg("v")
            .query(&mut c)
            .unwrap();
        want = digest(&mut c);
        stop(node);
    }
    let m = std::fs::read_to_string(manifest(dir.path())).unwrap();
    assert!(
        m.contains("ferrokv-sum appendonly.aof.2.incr.aof.sum"),
        "{m}"
    );
    assert!(redis_check_aof(dir.path()).contains("are valid"));
    let (incr, _) = last_incr(dir.path());
    let ours_len = std::fs::metadata(&incr).unwrap().len();
    {
        let r =
            ServerProcess::redis(&["--appendonly", "yes", "--dir", dir.path().to_str().unwrap()]);
        let mut rc = r.client();
        assert_eq!(digest(&mut rc), want, "{}", r.log());
        // Redis appends to the same file.
        let () = redis::cmd("SET")
            .arg("from-redis")
            .arg("1")
            .query(&mut rc)
            .unwrap();
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut rc);
        std::thread::sleep(Duration::from_millis(300));
    }
    let appended = std::fs::metadata(&incr).unwrap().len() - ours_len;
    assert!(appended > 0);
    let node = Node::start(dir.path(), ALWAYS);
    let mut c = node.client();
    let v: String = redis::cmd("GET").arg("from-redis").query(&mut c).unwrap();
    assert_eq!(v, "1");
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "unverified"
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_unverified_bytes"),
        appended.to_string()
    );
    drop(c);
    stop(node);
    // ferrokv recorded Redis's bytes when it opened the file.
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
    assert!(!report.contains("no checksum record"), "{report}");
}

#[test]
fn a_directory_written_by_real_redis_loads_into_ferrokv_unchanged() {
    let r = ServerProcess::redis(&["--appendonly", "yes"]);
    let mut rc = r.client();
    write_keys(&mut rc, 0, 500, 25);
    for (cmd, args) in [
        ("RPUSH", &["l", "a", "b", "c"][..]),
        ("SADD", &["s", "1", "2", "x"]),
        ("ZADD", &["z", "1.5", "m"]),
        ("HSET", &["h", "f", "v"]),
        ("PEXPIRE", &["k1", "500000000"]),
        ("INCRBYFLOAT", &["f", "1.25"]),
    ] {
        let _: redis::Value = redis::cmd(cmd).arg(args).query(&mut rc).unwrap();
    }
    let want = digest(&mut rc);
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut rc);
    std::thread::sleep(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let src = r.dir.path().join("appendonlydir");
    let dst = dir.path().join("appendonlydir");
    std::fs::create_dir_all(&dst).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dst.join(e.file_name())).unwrap();
    }
    let (incr, sum) = last_incr(dir.path());
    assert!(sum.is_none());
    let redis_bytes = std::fs::read(&incr).unwrap();
    let node = Node::start(dir.path(), EVERYSEC);
    let mut c = node.client();
    assert_eq!(digest(&mut c), want);
    assert_eq!(
        std::fs::read(&incr).unwrap(),
        redis_bytes,
        "the file changed"
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "unverified"
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_unverified_bytes"),
        redis_bytes.len().to_string()
    );
    drop(c);
    stop(node);
    // From now on it has a companion, and Redis still loads it.
    let (_, sum) = last_incr(dir.path());
    assert!(sum.is_some());
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
    let r2 = ServerProcess::redis(&["--appendonly", "yes", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(digest(&mut r2.client()), want);
}

#[test]
fn config_set_aof_checksums_applies_to_the_next_incremental_file() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(dir.path(), EVERYSEC);
    let mut c = node.client();
    write_keys(&mut c, 0, 50, 10);
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-checksums")
        .arg("no")
        .query(&mut c)
        .unwrap();
    // The file being appended to keeps its companion until it is replaced.
    assert_eq!(persistence_field(&mut c, "aof_checksums"), "1");
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_for("the rewrite", 20, || {
        (persistence_field(&mut c, "aof_rewrites") == "1").then_some(())
    });
    assert_eq!(persistence_field(&mut c, "aof_checksums"), "0");
    write_keys(&mut c, 50, 100, 10);
    let want = digest(&mut c);
    drop(c);
    stop(node);
    let (incr, sum) = last_incr(dir.path());
    assert!(incr.ends_with("appendonly.aof.2.incr.aof"));
    assert!(sum.is_none(), "the new incr file has no companion");
    assert!(!dir
        .path()
        .join("appendonlydir/appendonly.aof.2.incr.aof.sum")
        .exists());
    let node = Node::start(dir.path(), &[EVERYSEC, &["--aof-checksums", "no"]].concat());
    let mut c = node.client();
    assert_eq!(digest(&mut c), want);
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "unverified"
    );
}

#[test]
fn a_mismatch_near_the_end_is_cut_within_aof_load_corrupt_tail_max_size() {
    let dir = tempfile::tempdir().unwrap();
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 200, 10);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    let recs = records(&std::fs::read(sum.unwrap()).unwrap());
    let mut data = std::fs::read(&incr).unwrap();
    // A bit of the third block from the end: bytes all there, so damage.
    let bad = recs[recs.len() - 3];
    data[bad.offset as usize + 50] ^= 0x01;
    std::fs::write(&incr, &data).unwrap();
    let tail = data.len() as u64 - bad.offset;
    // A limit below the damaged tail: refused.
    let mut small = ALWAYS.to_vec();
    let below = (tail - 1).to_string();
    small.extend(["--aof-load-corrupt-tail-max-size", &below]);
    let log = Node::try_start(dir.path(), &small).err().expect("refused");
    assert!(
        log.contains(&format!(
            "at offset {} in a block before the end",
            bad.offset
        )),
        "{log}"
    );
    // At the limit: cut at the last verified point.
    let mut enough = ALWAYS.to_vec();
    let at = tail.to_string();
    enough.extend(["--aof-load-corrupt-tail-max-size", &at]);
    let node = Node::start(dir.path(), &enough);
    let mut c = node.client();
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "recovered"
    );
    assert_eq!(dbsize(&mut c), bad.first_cmd as usize - 1);
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), bad.offset);
}

#[test]
fn a_missing_companion_loads_the_file_unverified_and_is_recreated() {
    let dir = tempfile::tempdir().unwrap();
    let want;
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 100, 10);
        want = digest(&mut c);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    std::fs::remove_file(sum.unwrap()).unwrap();
    let len = std::fs::metadata(&incr).unwrap().len();
    let node = Node::start(dir.path(), ALWAYS);
    let mut c = node.client();
    assert_eq!(digest(&mut c), want);
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "unverified"
    );
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_unverified_bytes"),
        len.to_string()
    );
    drop(c);
    stop(node);
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
    assert!(report.contains(&format!("ok, {len} bytes in")), "{report}");
}

/// `redis-check-aof --fix` (the advice Redis's own error gives) cuts a file
/// whose framing broke at its last whole command: the file is then shorter
/// than its companion describes. It is recognised as cut, not damaged:
/// with `aof-load-truncated yes` the verified blocks load and the part of
/// the block where the file now ends is cut (kept aside); with `no` the
/// error says what works (not `redis-check-aof --fix` again).
#[test]
fn a_file_cut_by_redis_check_aof_fix_loads_its_verified_blocks() {
    let dir = tempfile::tempdir().unwrap();
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 400, 8);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    let recs = records(&std::fs::read(sum.unwrap()).unwrap());
    let mut data = std::fs::read(&incr).unwrap();
    // Break the framing inside k200's command: its value's length line.
    let needle = format!("\r\n${}\r\n{}", value(200).len(), value(200));
    let at = data
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap()
        + 2;
    data[at] = b'x';
    std::fs::write(&incr, &data).unwrap();
    let bad = block_at(&recs, at as u64);
    assert!(bad.end() < recs.last().unwrap().end());
    let fix = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo y | redis-check-aof --fix {}",
            manifest(dir.path()).display()
        ))
        .output()
        .unwrap();
    let fixed_len = std::fs::metadata(&incr).unwrap().len();
    assert!(
        fixed_len < at as u64 && fixed_len >= bad.offset,
        "{fixed_len} {at} {bad:?}: {}",
        String::from_utf8_lossy(&fix.stdout)
    );
    let mut strict = ALWAYS.to_vec();
    strict.extend(["--aof-load-truncated", "no"]);
    let log = Node::try_start(dir.path(), &strict).err().expect("refused");
    assert!(
        log.contains("it was cut after its checksums were written")
            && log.contains("set the 'aof-load-truncated' configuration option to yes")
            && log.contains("remove its checksum file appendonly.aof.1.incr.aof.sum"),
        "{log}"
    );
    let node = Node::start(dir.path(), ALWAYS);
    let mut c = node.client();
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "truncated"
    );
    // The blocks before the cut one (a SELECT came first).
    assert_eq!(dbsize(&mut c), bad.first_cmd as usize - 1);
    assert_eq!(std::fs::metadata(&incr).unwrap().len(), bad.offset);
    if fixed_len > bad.offset {
        let aside =
            incr.with_file_name(format!("appendonly.aof.1.incr.aof.corrupt-{}", bad.offset));
        assert_eq!(
            std::fs::read(&aside).unwrap(),
            &data[bad.offset as usize..fixed_len as usize]
        );
    }
    // Appends go on, verified.
    write_keys(&mut c, 1000, 1010, 5);
    drop(c);
    stop(node);
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
}

/// The incremental file replaced by another well-formed one (a restored
/// backup, a file Redis wrote) while its old companion stays: recognised
/// as a stale companion, the operator told exactly what to do, nothing
/// loaded; doing it (removing the companion) loads the file, unverified,
/// and gives it a new companion.
#[test]
fn a_stale_companion_beside_a_replaced_file_is_named_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    {
        let node = Node::start(dir.path(), ALWAYS);
        let mut c = node.client();
        write_keys(&mut c, 0, 100, 10);
        stop(node);
    }
    let (incr, sum) = last_incr(dir.path());
    let sum = sum.unwrap();
    // The "backup": another well-formed file of commands.
    let mut other = Vec::new();
    for i in 0..50 {
        let (k, v) = (format!("other{i}"), value(i));
        other.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
    }
    std::fs::write(&incr, &other).unwrap();
    let log = Node::try_start(dir.path(), ALWAYS)
        .err()
        .expect("start-up must stop");
    assert!(
        log.contains("is nonetheless a well-formed AOF")
            && log.contains("appendonly.aof.1.incr.aof.sum is probably stale")
            && log.contains("remove appendonly.aof.1.incr.aof.sum and restart"),
        "{log}"
    );
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 1);
    assert!(report.contains("is probably stale"), "{report}");
    // As told.
    std::fs::remove_file(&sum).unwrap();
    let node = Node::start(dir.path(), ALWAYS);
    let mut c = node.client();
    assert_eq!(dbsize(&mut c), 50);
    assert_eq!(
        persistence_field(&mut c, "aof_last_load_verification"),
        "unverified"
    );
    drop(c);
    stop(node);
    let (code, report) = check_tool(dir.path());
    assert_eq!(code, 0, "{report}");
}
