//! Cluster mode end to end, with the tools Redis users run: clusters made
//! by `redis-cli --cluster create` of ferrokv nodes alone and of ferrokv
//! and redis-server 7.0 nodes together (masters and replicas of both
//! kinds), checked by `redis-cli --cluster check`; redirections with
//! Redis's texts; `kill -9` of a master, its replica's election, and the
//! old master's return as a replica from its nodes.conf.
//!
//! Every node runs on loopback with its bus on a free port and a node
//! timeout of 2 s. The scenarios run one at a time (elections are timing
//! sensitive on two cores).
mod common;
use common::{wait_for, wait_for_or, ServerProcess, FREE_PORT};
use std::process::Command;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

const NODE_ARGS: &[&str] = &[
    "--cluster-enabled",
    "yes",
    "--cluster-port",
    FREE_PORT,
    "--cluster-node-timeout",
    "2000",
];

fn ferrokv_node() -> ServerProcess {
    ServerProcess::ferrokv(NODE_ARGS)
}

fn ferrokv_node_with(extra: &[&str]) -> ServerProcess {
    let mut args = NODE_ARGS.to_vec();
    args.extend_from_slice(extra);
    ServerProcess::ferrokv(&args)
}

fn redis_node() -> ServerProcess {
    ServerProcess::redis(NODE_ARGS)
}

fn addr(p: &ServerProcess) -> String {
    format!("127.0.0.1:{}", p.port)
}

/// Runs redis-cli; its stdout and stderr together.
fn cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .output()
        .expect("redis-cli is installed");
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}

fn cluster_cmd(p: &ServerProcess, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = p.client();
    let mut cmd = redis::cmd("CLUSTER");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(&mut c)
}

fn text(v: redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        redis::Value::SimpleString(s) => s,
        other => format!("{other:?}"),
    }
}

fn cluster_nodes(p: &ServerProcess) -> String {
    text(cluster_cmd(p, &["NODES"]).unwrap())
}

fn cluster_info_field(p: &ServerProcess, field: &str) -> String {
    let info = text(cluster_cmd(p, &["INFO"]).unwrap());
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn myid(p: &ServerProcess) -> String {
    text(cluster_cmd(p, &["MYID"]).unwrap())
}

/// `redis-cli --cluster check` reports a consistent, fully covered
/// cluster, as seen from `p`.
fn assert_check_clean(p: &ServerProcess) -> String {
    wait_for("a clean --cluster check", 30, || {
        let out = cli(&["--cluster", "check", &addr(p)]);
        (out.contains("[OK] All nodes agree about slots configuration.")
            && out.contains("[OK] All 16384 slots covered.")
            && !out.contains("[ERR]")
            && !out.contains("[WARNING]"))
        .then_some(out)
    })
}

fn wait_state_ok(nodes: &[&ServerProcess]) {
    for n in nodes {
        wait_for("cluster_state:ok", 30, || {
            (cluster_info_field(n, "cluster_state") == "ok").then_some(())
        });
    }
}

/// The line of node `id` in `p`'s CLUSTER NODES.
fn line_of(p: &ServerProcess, id: &str) -> String {
    cluster_nodes(p)
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_default()
        .to_string()
}

/// Keys written through the cluster (following MOVED with redis-cli -c),
/// then every master with a replica waits for it (WAIT 1).
fn write_keys(entry: &ServerProcess, all: &[&ServerProcess], n: usize) {
    for i in 0..n {
        let key = format!("key:{i}");
        let out = cli(&[
            "-c",
            "-p",
            &entry.port.to_string(),
            "SET",
            &key,
            &format!("v{i}"),
        ]);
        assert!(out.trim() == "OK", "SET {key}: {out}");
    }
    let masters_with_replicas: Vec<String> = all.iter().filter_map(|n| master_of(n)).collect();
    for m in all {
        if masters_with_replicas.contains(&myid(m)) {
            let out = cli(&["-p", &m.port.to_string(), "WAIT", "1", "10000"]);
            assert_eq!(out.trim(), "1", "WAIT on {}", m.port);
        }
    }
}

/// Every key of `write_keys` reads back through the cluster. On a timeout
/// the panic shows the last reply and how `entry` sees the cluster.
fn assert_keys(entry: &ServerProcess, n: usize) {
    for i in 0..n {
        let key = format!("key:{i}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let out = cli(&["-c", "-p", &entry.port.to_string(), "GET", &key]);
            if out.trim() == format!("v{i}") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "GET {key} through port {}: {out:?}\n{}",
                entry.port,
                cluster_nodes(entry)
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

fn create(nodes: &[&ServerProcess], replicas: usize) -> String {
    let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
    args.extend(nodes.iter().map(|n| addr(n)));
    args.extend([
        "--cluster-replicas".into(),
        replicas.to_string(),
        "--cluster-yes".into(),
    ]);
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let out = cli(&args);
    assert!(
        out.contains("[OK] All 16384 slots covered."),
        "--cluster create failed:\n{out}"
    );
    out
}

/// The master id a node replicates, from its own CLUSTER NODES line.
fn master_of(p: &ServerProcess) -> Option<String> {
    let me = myid(p);
    let l = line_of(p, &me);
    let f: Vec<&str> = l.split(' ').collect();
    (f.len() > 3 && f[3] != "-").then(|| f[3].to_string())
}

#[test]
fn redirections_use_redis_texts_and_slots_are_indexed() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mp = metrics_port.to_string();
    let mut nodes = vec![ferrokv_node_with(&["--metrics-port", &mp])];
    nodes.push(ferrokv_node());
    nodes.push(ferrokv_node());
    let refs: Vec<&ServerProcess> = nodes.iter().collect();
    create(&refs, 0);
    wait_state_ok(&refs);
    assert_check_clean(&nodes[0]);
    // foo is slot 12182: served by the third master.
    let owner = nodes
        .iter()
        .find(|n| line_of(n, &myid(n)).contains("10923-16383"))
        .unwrap();
    let other = nodes.iter().find(|n| n.port != owner.port).unwrap();
    let mut c = other.client();
    let e: redis::RedisResult<String> = redis::cmd("GET").arg("foo").query(&mut c);
    let e = e.unwrap_err();
    assert_eq!(e.code(), Some("MOVED"), "{e:?}");
    assert!(
        e.to_string()
            .contains(&format!("12182 127.0.0.1:{}", owner.port)),
        "{e}"
    );
    let e: redis::RedisResult<String> = redis::cmd("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query(&mut owner.client());
    assert!(e
        .unwrap_err()
        .to_string()
        .contains("Keys in request don't hash to the same slot"),);
    // Keys with one hash tag live together; the slot index counts them.
    let mut oc = owner.client();
    let tag_slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg("{foo}")
        .query(&mut oc)
        .unwrap();
    assert_eq!(tag_slot, 12182);
    for i in 0..25 {
        let _: () = redis::cmd("SET")
            .arg(format!("{{foo}}:{i}"))
            .arg(i)
            .query(&mut oc)
            .unwrap();
    }
    let n: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(12182)
        .query(&mut oc)
        .unwrap();
    assert_eq!(n, 25);
    let keys: Vec<String> = redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(12182)
        .arg(10)
        .query(&mut oc)
        .unwrap();
    assert_eq!(keys.len(), 10);
    assert!(keys.iter().all(|k| k.starts_with("{foo}:")));
    // MEMORY STATS shows the index's bytes.
    let stats: redis::Value = redis::cmd("MEMORY").arg("STATS").query(&mut oc).unwrap();
    let text = format!("{stats:?}");
    let at = text.find("slot-to-keys").expect("db.0 has slot-to-keys");
    let after: String = text[at..]
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    assert!(after.parse::<u64>().unwrap() > 0, "{text}");
    // A transaction across slots is refused at EXEC with CROSSSLOT.
    let mut raw = owner.raw();
    raw.cmd(&["MULTI"]);
    raw.cmd(&["SET", "{foo}x", "1"]);
    let moved = raw.cmd(&["SET", "bar", "1"]);
    let ferrokv_resp::Frame::Error(e) = moved else {
        panic!("{moved:?}")
    };
    assert!(e.starts_with(b"MOVED 5061 127.0.0.1:"));
    let exec = raw.cmd(&["EXEC"]);
    let ferrokv_resp::Frame::Error(e) = exec else {
        panic!("{exec:?}")
    };
    assert!(
        e.starts_with(b"EXECABORT"),
        "{}",
        String::from_utf8_lossy(&e)
    );
    // Scripts: declared keys of two slots are CROSSSLOT; a key served
    // elsewhere, or of a second slot, is refused inside the script.
    let mut oc = owner.client();
    let eval = |c: &mut redis::Connection, script: &str, keys: &[&str]| -> String {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(script).arg(keys.len());
        for k in keys {
            cmd.arg(*k);
        }
        match cmd.query::<redis::Value>(c) {
            Ok(v) => format!("{v:?}"),
            Err(e) => e.to_string(),
        }
    };
    assert!(eval(&mut oc, "return 1", &["{foo}a", "bar"]).contains("same slot"));
    assert!(eval(&mut oc, "return redis.call('get', 'bar')", &[])
        .contains("Script attempted to access a non local key in a cluster node"));
    // "a" is slot 15495, served here too, but not the first key's slot.
    assert!(eval(
        &mut oc,
        "redis.call('set', '{foo}a', '1') return redis.call('set', 'a', '1')",
        &[]
    )
    .contains("Script attempted to access keys that do not hash to the same slot"));
    let r = eval(
        &mut oc,
        "#!lua flags=allow-cross-slot-keys\nredis.call('set', '{foo}a', '1') return redis.call('set', 'a', '1')",
        &[],
    );
    assert!(
        r.to_lowercase().contains("ok") && !r.contains("Script"),
        "{r}"
    );
    assert!(eval(&mut oc, "#!lua flags=no-cluster\nreturn 1", &[])
        .contains("Can not run script on cluster, 'no-cluster' flag is set."));
    // One database, as in Redis.
    for (cmd, err) in [
        (
            vec!["SELECT", "1"],
            "ERR SELECT is not allowed in cluster mode",
        ),
        (
            vec!["SWAPDB", "0", "1"],
            "ERR SWAPDB is not allowed in cluster mode",
        ),
        (
            vec!["MOVE", "{foo}x", "1"],
            "ERR MOVE is not allowed in cluster mode",
        ),
    ] {
        assert_eq!(
            raw.cmd(&cmd),
            ferrokv_resp::Frame::Error(err.as_bytes().to_vec())
        );
    }
    // Keyless commands and CLUSTER INFO work anywhere; INFO says cluster.
    assert_eq!(
        owner.info_field("cluster", "cluster_enabled").as_deref(),
        Some("1")
    );
    assert_eq!(cluster_info_field(other, "cluster_known_nodes"), "3");
    assert_eq!(cluster_info_field(other, "cluster_size"), "3");
    // /metrics says what CLUSTER INFO says.
    let text = wait_for("cluster metrics", 10, || {
        let t = common::scrape_metrics(metrics_port);
        (common::metric_value(&t, "ferrokv_cluster_state_ok").as_deref() == Some("1")).then_some(t)
    });
    for (series, value) in [
        ("ferrokv_cluster_enabled", "1"),
        ("ferrokv_cluster_known_nodes", "3"),
        ("ferrokv_cluster_size", "3"),
        ("ferrokv_cluster_slots{state=\"assigned\"}", "16384"),
        ("ferrokv_cluster_slots{state=\"fail\"}", "0"),
    ] {
        assert_eq!(
            common::metric_value(&text, series).as_deref(),
            Some(value),
            "{series}"
        );
    }
    let pings: f64 = common::metric_value(
        &text,
        "ferrokv_cluster_messages_received_total{type=\"ping\"}",
    )
    .unwrap()
    .parse()
    .unwrap();
    assert!(pings > 0.0);
}

#[test]
fn the_bus_closes_links_that_are_not_the_bus_or_claim_huge_messages() {
    use std::io::{Read, Write};
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let n = ferrokv_node();
    let bus = n.free_port.expect("the bus port");
    let closed = |s: &mut std::net::TcpStream| {
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 16];
        match s.read(&mut b) {
            Ok(0) => true,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            Ok(_) => false,
        }
    };
    // Not the bus.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", bus)).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert!(closed(&mut s));
    // A stranger announcing a 100 MB message is not buffered for.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", bus)).unwrap();
    let mut h = b"RCmb".to_vec();
    h.extend_from_slice(&(100u32 << 20).to_be_bytes());
    h.extend_from_slice(&[0u8; 4096]);
    s.write_all(&h).unwrap();
    assert!(closed(&mut s));
    // Nothing else noticed.
    let pong: String = redis::cmd("PING").query(&mut n.client()).unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(cluster_info_field(&n, "cluster_known_nodes"), "1");
}

#[test]
fn ferrokv_cluster_fails_over_on_kill_9_and_the_old_master_rejoins() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut nodes: Vec<ServerProcess> = (0..6).map(|_| ferrokv_node()).collect();
    {
        let refs: Vec<&ServerProcess> = nodes.iter().collect();
        create(&refs, 1);
        wait_state_ok(&refs);
        assert_check_clean(&nodes[0]);
    }
    {
        let refs: Vec<&ServerProcess> = nodes.iter().collect();
        write_keys(&nodes[0], &refs, 60);
    }
    // Kill a master; its replica must win the election.
    let victim = nodes
        .iter()
        .position(|n| master_of(n).is_none() && line_of(n, &myid(n)).contains("0-5460"))
        .unwrap();
    let victim_id = myid(&nodes[victim]);
    let replica = nodes
        .iter()
        .position(|n| master_of(n).as_deref() == Some(victim_id.as_str()))
        .expect("the victim has a replica");
    let replica_id = myid(&nodes[replica]);
    let _ = nodes[victim].child.kill();
    let _ = nodes[victim].child.wait();
    let watcher = (0..6).find(|&i| i != victim && i != replica).unwrap();
    wait_for("the replica promoted", 30, || {
        let l = line_of(&nodes[watcher], &replica_id);
        (l.contains("master") && l.contains("0-5460")).then_some(())
    });
    assert!(line_of(&nodes[watcher], &victim_id).contains("fail"));
    {
        let alive: Vec<&ServerProcess> =
            (0..6).filter(|&i| i != victim).map(|i| &nodes[i]).collect();
        wait_state_ok(&alive);
    }
    assert_keys(&nodes[watcher], 60);
    assert!(nodes[replica].log().contains("Failover election won"));
    // The old master restarts on its nodes.conf and follows the new one.
    nodes[victim].kill_and_restart();
    wait_for("the old master is a replica", 30, || {
        (master_of(&nodes[victim]).as_deref() == Some(replica_id.as_str())).then_some(())
    });
    wait_for("it replicates", 30, || {
        (nodes[victim]
            .info_field("replication", "master_link_status")
            .as_deref()
            == Some("up"))
        .then_some(())
    });
    assert_eq!(
        myid(&nodes[victim]),
        victim_id,
        "its id came from nodes.conf"
    );
    assert_check_clean(&nodes[watcher]);
    // CLUSTER FAILOVER on it (a manual failover: the master pauses, the
    // replica catches up, is elected and takes the slots back).
    let ok: String = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut nodes[victim].client())
        .unwrap();
    assert_eq!(ok, "OK");
    let logs = || {
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                format!(
                    "--- node {i} (old master {victim}, its master {replica}):\n{}",
                    n.log()
                )
            })
            .collect::<String>()
    };
    wait_for_or(
        "the manual failover",
        30,
        || {
            let l = line_of(&nodes[watcher], &victim_id);
            (l.contains("master") && l.contains("0-5460")).then_some(())
        },
        logs,
    );
    wait_for("the other side follows", 30, || {
        (master_of(&nodes[replica]).as_deref() == Some(victim_id.as_str())).then_some(())
    });
    assert!(nodes[victim]
        .log()
        .contains("Manual failover user request accepted."));
    assert!(nodes[replica]
        .log()
        .contains("Manual failover requested by replica"));
    assert_keys(&nodes[watcher], 60);
}

#[test]
fn mixed_cluster_of_ferrokv_and_redis_nodes_fails_over_both_ways() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Masters: ferrokv, redis, ferrokv.
    let a = ferrokv_node();
    let mut b = redis_node();
    let c = ferrokv_node();
    create(&[&a, &b, &c], 0);
    // A redis-server replica of a ferrokv master, a ferrokv replica of a
    // redis-server master, added as redis-cli adds them.
    let ra = redis_node();
    let rb = ferrokv_node();
    for (r, m) in [(&ra, &a), (&rb, &b)] {
        let id = myid(m);
        let out = cli(&[
            "--cluster",
            "add-node",
            &addr(r),
            &addr(m),
            "--cluster-slave",
            "--cluster-master-id",
            &id,
        ]);
        assert!(out.contains("[OK] New node added correctly."), "{out}");
    }
    wait_for("replicas attached", 30, || {
        (master_of(&ra).as_deref() == Some(myid(&a).as_str())
            && master_of(&rb).as_deref() == Some(myid(&b).as_str()))
        .then_some(())
    });
    let all = [&a, &b, &c, &ra, &rb];
    wait_state_ok(&all);
    // Both kinds agree, checked from each kind.
    assert_check_clean(&a);
    assert_check_clean(&b);
    // PUBLISH reaches subscribers on every node, over the bus, from either
    // kind of node to the other.
    let mut on_redis = b.raw();
    let mut on_ferrokv = c.raw();
    for s in [&mut on_redis, &mut on_ferrokv] {
        s.cmd(&["SUBSCRIBE", "news"]);
    }
    for (from, text) in [(&a, "from-ferrokv"), (&ra, "from-redis")] {
        let mut p = from.client();
        let _: i64 = redis::cmd("PUBLISH")
            .arg("news")
            .arg(text)
            .query(&mut p)
            .unwrap();
        for s in [&mut on_redis, &mut on_ferrokv] {
            let m = s.read_frame();
            let expected = ferrokv_resp::Frame::Array(vec![
                ferrokv_resp::Frame::Bulk(b"message".to_vec()),
                ferrokv_resp::Frame::Bulk(b"news".to_vec()),
                ferrokv_resp::Frame::Bulk(text.as_bytes().to_vec()),
            ]);
            assert_eq!(m, expected);
        }
    }
    write_keys(&a, &all, 40);

    // The redis-server master dies: its ferrokv replica is elected.
    let b_id = myid(&b);
    let rb_id = myid(&rb);
    let _ = b.child.kill();
    let _ = b.child.wait();
    wait_for("the ferrokv replica promoted", 30, || {
        let l = line_of(&c, &rb_id);
        l.contains("master").then_some(())
    });
    wait_state_ok(&[&a, &c, &ra, &rb]);
    assert_keys(&a, 40);
    // The old redis master comes back as a replica of the ferrokv node.
    b.kill_and_restart();
    wait_for("redis follows ferrokv", 30, || {
        (master_of(&b).as_deref() == Some(rb_id.as_str())).then_some(())
    });
    assert_eq!(myid(&b), b_id);
    assert_check_clean(&b);
    wait_for("the redis replica is in sync", 30, || {
        (b.info_field("replication", "master_link_status").as_deref() == Some("up")).then_some(())
    });

    // The ferrokv master dies: its redis-server replica is elected, with
    // the votes of ferrokv masters.
    let ra_id = myid(&ra);
    let mut a = a;
    let _ = a.child.kill();
    let _ = a.child.wait();
    wait_for("the redis replica promoted", 30, || {
        let l = line_of(&rb, &ra_id);
        l.contains("master").then_some(())
    });
    wait_state_ok(&[&b, &c, &ra, &rb]);
    assert_keys(&c, 40);
    // The vote for the redis replica, not the earlier one for rb.
    let vote = format!("Failover auth granted to {ra_id}");
    assert!(
        c.log().contains(&vote) || rb.log().contains(&vote),
        "a ferrokv master voted for the redis replica"
    );
}

#[test]
fn redis_py_cluster_client_keeps_every_write_through_resharding_both_ways() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // (redis-cli creates clusters of 3 masters at least.)
    let a = ferrokv_node();
    let b = redis_node();
    let c = ferrokv_node();
    create(&[&a, &b, &c], 0);
    wait_state_ok(&[&a, &b, &c]);
    let (ida, idb) = (myid(&a), myid(&b));
    let stop = a.dir.path().join("resharded");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/redis_py_cluster.py"
    );
    let client = Command::new("python3")
        .arg(script)
        .arg(a.port.to_string())
        .arg(&stop)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 with redis-py is required");
    // The load is running before the first slot moves.
    wait_for("the client writing", 60, || {
        let n = |p: &ServerProcess| -> i64 { redis::cmd("DBSIZE").query(&mut p.client()).unwrap() };
        (n(&a) + n(&b) + n(&c) > 2000).then_some(())
    });
    // 4096 slots each way (a quarter of them, three quarters of a
    // master's): ferrokv → redis, then redis → ferrokv.
    for (from, to, entry) in [(&ida, &idb, &a), (&idb, &ida, &b)] {
        let out = cli(&[
            "--cluster",
            "reshard",
            &addr(entry),
            "--cluster-from",
            from,
            "--cluster-to",
            to,
            "--cluster-slots",
            "4096",
            "--cluster-yes",
        ]);
        assert!(
            !out.contains("[ERR]"),
            "reshard: {}",
            &out[out.len().saturating_sub(2000)..]
        );
        assert_eq!(
            out.matches("Moving slot").count(),
            4096 * 2,
            "each slot listed, then moved"
        );
    }
    // `--cluster rebalance`: by weight (the first ferrokv master takes
    // half of all slots from the other two, one of each kind), then even
    // again; the load still running.
    let idc = myid(&c);
    let w = [format!("{ida}=2"), format!("{idb}=1"), format!("{idc}=1")];
    for weights in [&w[..], &[]] {
        let entry = addr(&a);
        let mut args: Vec<&str> = vec!["--cluster", "rebalance", &entry];
        if !weights.is_empty() {
            args.push("--cluster-weight");
            args.extend(weights.iter().map(|s| s.as_str()));
        }
        args.push("--cluster-yes");
        let out = cli(&args);
        assert!(
            out.contains("Rebalancing across 3 nodes") && !out.contains("[ERR]"),
            "rebalance: {}",
            &out[out.len().saturating_sub(2000)..]
        );
        let held = line_of(&a, &ida);
        let slots: usize = held
            .split(' ')
            .skip(8)
            .filter_map(|r| {
                let (x, y) = r.split_once('-').unwrap_or((r, r));
                Some(y.parse::<usize>().ok()? - x.parse::<usize>().ok()? + 1)
            })
            .sum();
        let want = if weights.is_empty() { 5461 } else { 8192 };
        assert!(
            slots.abs_diff(want) <= 2,
            "the first master holds {slots} slots after the rebalance (want about {want})"
        );
    }
    std::fs::write(&stop, b"").unwrap();
    let out = client.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("cluster client: OK"),
        "{text}"
    );
    eprintln!("{text}");
    assert_check_clean(&a);
    // Keys moved both ways are counted where they now live.
    let count_on =
        |p: &ServerProcess| -> i64 { redis::cmd("DBSIZE").query(&mut p.client()).unwrap() };
    assert!(count_on(&a) > 0 && count_on(&b) > 0);
}

/// Replica migration: a master left without a working replica
/// (orphaned) gets one from the master with the most replicas, once
/// `cluster-migration-barrier` allows, and not before. The orphaned
/// master is a redis-server; the replica that moves is ferrokv's (the
/// smallest id of the two replicas of the first master, as Redis picks).
#[test]
fn a_replica_migrates_to_an_orphaned_master_within_the_barrier() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let a = ferrokv_node();
    let b = redis_node();
    let c = ferrokv_node();
    create(&[&a, &b, &c], 0);
    let metrics_port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (mp1, mp2) = (metrics_port(), metrics_port());
    let a1 = ferrokv_node_with(&[
        "--cluster-migration-barrier",
        "2",
        "--metrics-port",
        &mp1.to_string(),
    ]);
    let a2 = ferrokv_node_with(&[
        "--cluster-migration-barrier",
        "2",
        "--metrics-port",
        &mp2.to_string(),
    ]);
    let mut b1 = ferrokv_node();
    // A redis replica of a master with one replica: it must not move.
    let c1 = redis_node();
    for (r, m) in [(&a1, &a), (&a2, &a), (&b1, &b), (&c1, &c)] {
        let id = myid(m);
        let out = cli(&[
            "--cluster",
            "add-node",
            &addr(r),
            &addr(m),
            "--cluster-slave",
            "--cluster-master-id",
            &id,
        ]);
        assert!(out.contains("[OK] New node added correctly."), "{out}");
    }
    let (a_id, b_id) = (myid(&a), myid(&b));
    wait_for("replicas attached", 30, || {
        (master_of(&a1).as_deref() == Some(a_id.as_str())
            && master_of(&a2).as_deref() == Some(a_id.as_str())
            && master_of(&b1).as_deref() == Some(b_id.as_str())
            && master_of(&c1).as_deref() == Some(myid(&c).as_str()))
        .then_some(())
    });
    wait_state_ok(&[&a, &b, &c, &a1, &a2, &b1, &c1]);
    // B's only replica dies: B is orphaned.
    let b1_id = myid(&b1);
    let _ = b1.child.kill();
    let _ = b1.child.wait();
    // Both replicas of A must see it FAIL (not only `fail?`): either may
    // be the one that moves, and a PFAIL replica still counts as working.
    let failed = |r: &ServerProcess| {
        line_of(r, &b1_id)
            .split(' ')
            .nth(2)
            .is_some_and(|flags| flags.split(',').any(|f| f == "fail"))
    };
    wait_for("the dead replica flagged FAIL", 30, || {
        (failed(&a1) && failed(&a2)).then_some(())
    });
    // With a barrier of 2, A (two replicas) keeps both: past the 5 s the
    // orphan must last, nobody has moved.
    std::thread::sleep(std::time::Duration::from_secs(7));
    for r in [&a1, &a2] {
        assert_eq!(
            master_of(r).as_deref(),
            Some(a_id.as_str()),
            "moved under barrier 2"
        );
    }
    // Barrier 1: A keeps one, so the replica with the smaller id moves.
    for r in [&a1, &a2] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("cluster-migration-barrier")
            .arg("1")
            .query(&mut r.client())
            .unwrap();
    }
    let (mover, stayer, mover_metrics) = if myid(&a1) < myid(&a2) {
        (&a1, &a2, mp1)
    } else {
        (&a2, &a1, mp2)
    };
    // (60 s: the mover must also have seen the dead replica flagged FAIL,
    // which the check above asked of one node only.)
    wait_for_or(
        "the migration to the orphaned master",
        60,
        || (master_of(mover).as_deref() == Some(b_id.as_str())).then_some(()),
        || {
            format!(
                "mover's view:\n{}\nstayer's view:\n{}\nmover's log:\n{}",
                cluster_nodes(mover),
                cluster_nodes(stayer),
                mover.log()
            )
        },
    );
    assert!(mover
        .log()
        .contains(&format!("Migrating to orphaned master {b_id}")));
    assert_eq!(master_of(stayer).as_deref(), Some(a_id.as_str()));
    assert_eq!(master_of(&c1).as_deref(), Some(myid(&c).as_str()));
    // The redis master sees its new replica, and every node agrees.
    wait_for("the redis master has its new replica", 30, || {
        (b.info_field("replication", "connected_slaves").as_deref() == Some("1")).then_some(())
    });
    // (The metrics are a snapshot the loop refreshes.)
    wait_for("the migration counted in /metrics", 10, || {
        let m = common::scrape_metrics(mover_metrics);
        (common::metric_value(&m, "ferrokv_cluster_replica_migrations_total").as_deref()
            == Some("1"))
        .then_some(())
    });
}
