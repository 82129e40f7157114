//! `maxmemory` and its policies, on the real binary: used memory stays
//! under the limit through a sustained write load, each policy evicts
//! the keys it should (only keys with a TTL for `volatile-*`, the nearest
//! expiry first for `volatile-ttl`, cold keys before hot ones for LRU and
//! LFU), `noeviction` refuses growing commands with Redis's OOM error and
//! still serves reads and deletes, and evictions reach the AOF as `DEL`s.
mod common;
use common::ServerProcess;
use redis::Connection;

const VALUE: usize = 1000;

fn start(extra: &[&str]) -> ServerProcess {
    let mut args = vec!["--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    ServerProcess::ferrokv(&args)
}

fn used(c: &mut Connection) -> u64 {
    info_u64(c, "memory", "used_memory")
}

fn info_u64(c: &mut Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

/// Sets maxmemory to the memory in use now plus `room` bytes.
fn limit_to(c: &mut Connection, room: u64) -> u64 {
    let max = used(c) + room;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(max)
        .query(c)
        .unwrap();
    max
}

fn set_policy(c: &mut Connection, p: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg(p)
        .query(c)
        .unwrap();
}

/// Writes `n` keys `prefix:i` of VALUE bytes in pipelined batches, with
/// an expiry when `ttl` is given; returns the highest used_memory seen
/// after each batch.
fn write_load(c: &mut Connection, prefix: &str, n: usize, ttl: Option<u64>) -> u64 {
    let value = vec![b'v'; VALUE];
    let mut peak = 0;
    for batch in (0..n).collect::<Vec<_>>().chunks(100) {
        let mut p = redis::pipe();
        for i in batch {
            let cmd = p.cmd("SET").arg(format!("{prefix}:{i}")).arg(&value[..]);
            if let Some(t) = ttl {
                cmd.arg("EX").arg(t + *i as u64);
            }
            cmd.ignore();
        }
        let _: () = p.query(c).unwrap();
        peak = peak.max(used(c));
    }
    peak
}

fn exists(c: &mut Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(c).unwrap() == 1
}

#[test]
fn allkeys_policies_keep_used_memory_under_the_limit() {
    for policy in ["allkeys-random", "allkeys-lru", "allkeys-lfu"] {
        let srv = start(&[]);
        let mut c = srv.client();
        set_policy(&mut c, policy);
        let max = limit_to(&mut c, 2 << 20);
        // ~10 MB of values into 2 MB of room.
        let peak = write_load(&mut c, "k", 10_000, None);
        // One batch of 100 x 1 KB may land before the next round evicts.
        assert!(
            peak <= max + 256 * 1024,
            "{policy}: used_memory reached {peak} with maxmemory {max}"
        );
        let evicted = info_u64(&mut c, "stats", "evicted_keys");
        let keys: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
        assert!(evicted > 5_000, "{policy}: evicted {evicted}");
        assert_eq!(
            keys + evicted,
            10_000,
            "{policy}: every key is there or evicted"
        );
        // Writes still succeed: eviction makes room.
        let _: () = redis::cmd("SET")
            .arg("last")
            .arg("x")
            .query(&mut c)
            .unwrap();
        assert!(exists(&mut c, "last"));
    }
}

#[test]
fn noeviction_refuses_growing_commands_but_serves_reads_and_deletes() {
    let srv = start(&[]);
    let mut c = srv.client();
    let _ = write_load(&mut c, "k", 10, None);
    limit_to(&mut c, 512 * 1024);
    let value = vec![b'v'; VALUE];
    let mut refused = None;
    for i in 0..5_000 {
        let r: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("n:{i}"))
            .arg(&value[..])
            .query(&mut c);
        if let Err(e) = r {
            refused = Some(e.to_string());
            break;
        }
    }
    let refused = refused.expect("writes are refused past maxmemory");
    assert!(
        refused.contains("command not allowed when used memory > 'maxmemory'"),
        "{refused}"
    );
    let mut raw = srv.raw();
    assert_eq!(
        raw.cmd(&["SET", "x", "y"]),
        ferrokv_resp::Frame::Error(
            b"OOM command not allowed when used memory > 'maxmemory'.".to_vec()
        )
    );
    // Reads and deletes are not denyoom.
    let v: Vec<u8> = redis::cmd("GET").arg("k:1").query(&mut c).unwrap();
    assert_eq!(v.len(), VALUE);
    assert_eq!(info_u64(&mut c, "stats", "evicted_keys"), 0);
    let _: () = redis::cmd("FLUSHALL").query(&mut c).unwrap();
    let _: () = redis::cmd("SET").arg("x").arg("y").query(&mut c).unwrap();
}

#[test]
fn volatile_policies_evict_only_keys_with_a_ttl() {
    for policy in [
        "volatile-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-ttl",
    ] {
        let srv = start(&[]);
        let mut c = srv.client();
        set_policy(&mut c, policy);
        // 500 keys without a TTL stay whatever happens.
        let _ = write_load(&mut c, "keep", 500, None);
        let max = limit_to(&mut c, 1 << 20);
        let peak = write_load(&mut c, "tmp", 5_000, Some(1000));
        assert!(peak <= max + 256 * 1024, "{policy}: {peak} > {max}");
        for i in 0..500 {
            assert!(
                exists(&mut c, &format!("keep:{i}")),
                "{policy}: keep:{i} evicted"
            );
        }
        assert!(info_u64(&mut c, "stats", "evicted_keys") > 2_000);
        if policy == "volatile-ttl" {
            // TTLs grow with the index: the nearest expiries went first.
            let early = (0..1000)
                .filter(|i| exists(&mut c, &format!("tmp:{i}")))
                .count();
            let late = (4000..5000)
                .filter(|i| exists(&mut c, &format!("tmp:{i}")))
                .count();
            assert!(early < late, "{policy}: early {early} late {late}");
        }
        // No key with a TTL left to evict: growing writes are refused.
        let value = vec![b'v'; VALUE];
        let mut refused = false;
        let keys: Vec<String> = redis::cmd("KEYS").arg("tmp:*").query(&mut c).unwrap();
        for k in keys {
            let _: i64 = redis::cmd("PERSIST").arg(k).query(&mut c).unwrap();
        }
        for i in 0..3000 {
            if redis::cmd("SET")
                .arg(format!("more:{i}"))
                .arg(&value[..])
                .query::<()>(&mut c)
                .is_err()
            {
                refused = true;
                break;
            }
        }
        assert!(
            refused,
            "{policy}: no volatile key left, yet writes went on"
        );
    }
}

#[test]
fn lru_and_lfu_evict_cold_keys_before_hot_ones() {
    for policy in ["allkeys-lru", "allkeys-lfu"] {
        let srv = start(&[]);
        let mut c = srv.client();
        set_policy(&mut c, policy);
        let _ = write_load(&mut c, "k", 2000, None);
        // The LRU clock counts seconds: let the cold keys age.
        std::thread::sleep(std::time::Duration::from_millis(2100));
        // Touch the hot tenth, many times for LFU's counter.
        for _ in 0..20 {
            let mut p = redis::pipe();
            for i in 0..200 {
                p.cmd("GET").arg(format!("k:{i}")).ignore();
            }
            let _: () = p.query(&mut c).unwrap();
        }
        if policy == "allkeys-lfu" {
            let hot: i64 = redis::cmd("OBJECT")
                .arg("FREQ")
                .arg("k:0")
                .query(&mut c)
                .unwrap();
            let cold: i64 = redis::cmd("OBJECT")
                .arg("FREQ")
                .arg("k:1999")
                .query(&mut c)
                .unwrap();
            assert!(hot > cold, "OBJECT FREQ hot {hot} cold {cold}");
        } else {
            let idle: i64 = redis::cmd("OBJECT")
                .arg("IDLETIME")
                .arg("k:1999")
                .query(&mut c)
                .unwrap();
            assert!(idle >= 2, "idle {idle}");
        }
        // Half of the data set must go.
        let _ = limit_to(&mut c, 0);
        let _ = write_load(&mut c, "new", 1000, None);
        let hot_left = (0..200)
            .filter(|i| exists(&mut c, &format!("k:{i}")))
            .count();
        let cold_left = (200..2000)
            .filter(|i| exists(&mut c, &format!("k:{i}")))
            .count();
        assert!(
            hot_left >= 180 && (hot_left as f64 / 200.0) > (cold_left as f64 / 1800.0),
            "{policy}: hot keys left {hot_left}/200, cold {cold_left}/1800"
        );
    }
}

#[test]
fn evictions_are_propagated_to_the_aof_as_del() {
    let srv = start(&[
        "--appendonly",
        "yes",
        "--maxmemory-policy",
        "allkeys-random",
    ]);
    let mut c = srv.client();
    limit_to(&mut c, 1 << 20);
    let _ = write_load(&mut c, "k", 3000, None);
    let evicted = info_u64(&mut c, "stats", "evicted_keys");
    assert!(evicted > 0);
    let dir = srv.dir.path().join("appendonlydir");
    let mut dels = 0;
    for f in std::fs::read_dir(&dir).unwrap() {
        let path = f.unwrap().path();
        if path.to_string_lossy().ends_with(".incr.aof") {
            let text = std::fs::read(&path).unwrap();
            dels += text
                .windows(13)
                .filter(|w| w == b"*2\r\n$3\r\nDEL\r\n")
                .count();
        }
    }
    assert_eq!(dels as u64, evicted, "one DEL per evicted key in the AOF");
    let info: String = redis::cmd("INFO").arg("memory").query(&mut c).unwrap();
    assert!(info.contains("maxmemory_policy:allkeys-random"));
}
