//! Shared by the replication suites (`replication.rs`, `rdma_sync.rs`):
//! servers, INFO fields, convergence, and a data set of every type.
use super::ServerProcess;
use std::time::Duration;

pub fn ferrokv(extra: &[&str]) -> ServerProcess {
    let mut args = vec!["--enable-debug-command", "yes"];
    args.extend_from_slice(extra);
    ServerProcess::ferrokv(&args)
}

pub fn info(p: &ServerProcess, section: &str, field: &str) -> String {
    p.info_field(section, field).unwrap_or_default()
}

pub fn num(p: &ServerProcess, section: &str, field: &str) -> i64 {
    info(p, section, field).trim().parse().unwrap_or(-1)
}

pub fn digest(p: &ServerProcess) -> String {
    let mut c = p.client();
    redis::cmd("DEBUG").arg("DIGEST").query(&mut c).unwrap()
}

pub fn replicaof(replica: &ServerProcess, master: &ServerProcess) {
    let mut c = replica.client();
    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(master.port)
        .query(&mut c)
        .unwrap();
}

pub fn wait_converged(master: &ServerProcess, replica: &ServerProcess, secs: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        let up = info(replica, "replication", "master_link_status") == "up";
        let m = num(master, "replication", "master_repl_offset");
        let r = num(replica, "replication", "slave_repl_offset");
        if up && m == r && digest(master) == digest(replica) {
            return;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "replica did not converge (up {up}, offsets {m} / {r})\n--- master log\n{}\n--- replica log\n{}",
                master.log(),
                replica.log()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a command; `false` only for `ERR unknown command` (a type the
/// server does not have yet).
pub fn try_cmd_str(c: &mut redis::Connection, args: &[&str]) -> bool {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(_) => true,
        Err(e) if e.to_string().contains("unknown command") => false,
        Err(e) => panic!("{args:?} failed: {e}"),
    }
}

/// The collection types a ferrokv has (they land in parallel): a data set
/// made on a real Redis uses only what the ferrokv replica can load.
#[derive(Clone, Copy)]
pub struct Types {
    pub hash: bool,
    pub list: bool,
    pub set: bool,
    pub zset: bool,
}

pub fn types_of(ferrokv: &ServerProcess) -> Types {
    let mut r = ferrokv.raw();
    let mut has = |name: &str| {
        !matches!(
            r.cmd(&["COMMAND", "INFO", name]),
            ferrokv_resp::Frame::Array(ref v) if v.first() == Some(&ferrokv_resp::Frame::Null)
        )
    };
    Types {
        hash: has("hset"),
        list: has("rpush") && has("lpush"),
        set: has("sadd"),
        zset: has("zadd") && has("zincrby"),
    }
}

/// Strings (ints, binary, expiries, another database), hashes, lists,
/// sets, sorted sets in both encodings (those `t` has), and optionally a
/// 50 MB value.
pub fn fill_dataset(p: &ServerProcess, n: usize, huge: bool, t: Types) {
    let mut c = p.client();
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("SET")
            .arg(format!("k:{i}"))
            .arg(format!("v-{i}-{}", "y".repeat(i % 70)))
            .ignore();
        if i % 5 == 0 {
            pipe.cmd("PEXPIRE")
                .arg(format!("k:{i}"))
                .arg(50_000_000)
                .ignore();
        }
        if i % 3 == 0 {
            pipe.cmd("SET")
                .arg(format!("n:{i}"))
                .arg(i as i64 * 1_000_003 - 77)
                .ignore();
        }
    }
    pipe.cmd("SET")
        .arg(b"bin\x00key\r\n\xff".as_slice())
        .arg(vec![0u8, 1, 2, 13, 10, 255, 0])
        .ignore();
    pipe.cmd("SET").arg("big").arg(vec![7u8; 300_000]).ignore();
    pipe.cmd("SELECT").arg(5).ignore();
    pipe.cmd("SET").arg("in-db5").arg("five").ignore();
    pipe.cmd("SELECT").arg(0).ignore();
    pipe.query::<()>(&mut c).unwrap();
    let big: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    for i in 0..20 {
        let k = i.to_string();
        if t.hash {
            try_cmd_str(&mut c, &["HSET", &format!("h:{k}"), "f1", "v1", "f2", &k]);
        }
        if t.list {
            try_cmd_str(&mut c, &["RPUSH", &format!("l:{k}"), "a", "b", &k]);
        }
        if t.set {
            try_cmd_str(&mut c, &["SADD", &format!("s:{k}"), "1", "2", "x", &k]);
        }
        if t.zset {
            try_cmd_str(&mut c, &["ZADD", &format!("z:{k}"), "1.5", "a", "2", &k]);
        }
    }
    // The large encodings (hashtable, quicklist, hashtable set, skiplist).
    for m in &big {
        if t.hash {
            try_cmd_str(&mut c, &["HSET", "h:big", m, m]);
        }
        if t.list {
            try_cmd_str(&mut c, &["RPUSH", "l:big", m]);
        }
        if t.set {
            try_cmd_str(&mut c, &["SADD", "s:big", m]);
        }
        if t.zset {
            try_cmd_str(&mut c, &["ZADD", "z:big", &m.len().to_string(), m]);
        }
    }
    if huge {
        // Incompressible, so the snapshot really carries 50 MB.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let v: Vec<u8> = (0..50 * 1024 * 1024u32)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let _: () = redis::cmd("SET").arg("huge").arg(v).query(&mut c).unwrap();
    }
}
