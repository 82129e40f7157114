//! Guards `INFO` against Redis 7.0.15's: `INFO everything` of both
//! servers, side by side, has the same sections in the same order and
//! every field Redis prints, in Redis's order, with and without the AOF
//! and on a master with a replica; the only extra fields are ferrokv's
//! own, listed here and in docs/info.md. The per-command sections
//! (commandstats, errorstats, latencystats) and the keyspace are compared
//! after the same commands ran on both. Some values are checked too: the
//! replication byte counters, the memory breakdown, the cluster section.
mod common;
use common::{wait_for, ServerProcess};

/// Fields only ferrokv prints (docs/info.md says what they mean).
const FERROKV_ONLY: &[&str] = &[
    "ferrokv_version",
    "connected_clients_tcp",
    "connected_clients_unix",
    "connected_clients_rdma",
    "connected_clients_tls",
    "output_paused_clients",
    "used_memory_dataset_tables",
    "allocator_collect_usec",
    "buffer_pool_free",
    "current_save_loop_share",
    "aof_fsync_policy",
    "aof_checksums",
    "aof_checksum_blocks_written",
    "aof_checksum_bytes_written",
    "aof_last_load_verification",
    "aof_last_load_verified_bytes",
    "aof_last_load_verified_blocks",
    "aof_last_load_unverified_bytes",
    "scripts_killed",
    "busy_scripts",
    "busy_replies",
    "client_query_buffer_limit_disconnections",
    "client_output_buffer_limit_disconnections",
    "client_output_pauses",
    // Redis 7.4's (hash fields removed by their TTL).
    "expired_subkeys",
    "acl_access_denied_auth",
    "acl_access_denied_cmd",
    "acl_access_denied_key",
    "acl_access_denied_channel",
];

/// (section, field) in the order printed; `None` for a section header.
fn fields(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix("# ") {
            section = h.to_string();
            out.push((section.clone(), None));
            continue;
        }
        let (k, _) = line.split_once(':').expect("field:value");
        out.push((section.clone(), Some(k.to_string())));
    }
    out
}

fn info(p: &ServerProcess, what: &str) -> String {
    let reply = p.raw().cmd(&["INFO", what]);
    String::from_utf8_lossy(reply.as_bytes().expect("INFO is a string")).into_owned()
}

/// The same commands on both servers, so the per-command sections and the
/// keyspace name the same things.
fn same_load(p: &ServerProcess) {
    let mut r = p.raw();
    for args in [
        &["SET", "k", "v"][..],
        &["GET", "k"],
        &["LPUSH", "l", "a"],
        &["HSET", "h", "f", "v"],
        &["INCR", "k"],
        &["SELECT", "3"],
        &["SET", "k3", "v", "EX", "1000"],
    ] {
        r.cmd(args);
    }
}

/// A master's PING to its replicas comes when its cron says (Redis: on
/// a 10-second grid counted from its start), so a replica may or may not
/// have run one yet.
fn timing_free(mut v: Vec<(String, Option<String>)>) -> Vec<(String, Option<String>)> {
    v.retain(|(_, k)| !k.as_deref().is_some_and(|k| k.ends_with("_ping")));
    v
}

fn compare(ours: &ServerProcess, real: &ServerProcess, case: &str) {
    let f = timing_free(fields(&info(ours, "everything")));
    let r = timing_free(fields(&info(real, "everything")));
    let extra: Vec<_> = f
        .iter()
        .filter(|x| !r.contains(x))
        .filter(|(s, k)| {
            s != "Rdma"
                && s != "Threads"
                && !k.as_deref().is_some_and(|k| FERROKV_ONLY.contains(&k))
        })
        .collect();
    let missing: Vec<_> = r.iter().filter(|x| !f.contains(x)).collect();
    assert!(
        missing.is_empty(),
        "{case}: Redis prints, ferrokv does not: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "{case}: ferrokv prints, not listed as its own: {extra:?}"
    );
    // Redis's fields come in Redis's order, but for the per-command
    // lines, which Redis prints in its hash table's order.
    let ordered = |x: &&(String, Option<String>)| {
        x.1.is_none() || !["Commandstats", "Latencystats", "Errorstats"].contains(&x.0.as_str())
    };
    let common: Vec<_> = f.iter().filter(|x| r.contains(x)).filter(ordered).collect();
    let want: Vec<_> = r.iter().filter(ordered).collect();
    assert!(common == want, "{case}: order\n{common:?}\n{want:?}");
}

#[test]
fn info_everything_has_every_redis_field_in_redis_order() {
    for (case, args) in [("default", &[][..]), ("aof", &["--appendonly", "yes"][..])] {
        let ours = ServerProcess::ferrokv(args);
        let real = ServerProcess::redis(args);
        same_load(&ours);
        same_load(&real);
        compare(&ours, &real, case);
    }
}

#[test]
fn a_master_and_its_replica_print_what_redis_prints() {
    let ours = ServerProcess::ferrokv(&[]);
    let real = ServerProcess::redis(&[]);
    let ours_replica = ServerProcess::ferrokv(&[]);
    let real_replica = ServerProcess::redis(&[]);
    for (m, r) in [(&ours, &ours_replica), (&real, &real_replica)] {
        same_load(m);
        r.raw()
            .cmd(&["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
        wait_for("the replica online", 20, || {
            r.info_field("replication", "master_link_status")
                .filter(|s| s == "up")
        });
        same_load(r);
    }
    compare(&ours, &real, "master");
    compare(&ours_replica, &real_replica, "replica");
    // Replication traffic is counted apart from client traffic.
    let n = |p: &ServerProcess, f: &str| -> u64 {
        p.info_field("stats", f).unwrap().trim().parse().unwrap()
    };
    ours.raw().cmd(&["SET", "after", "x"]);
    wait_for("the write replicated", 10, || {
        (n(&ours_replica, "total_net_repl_input_bytes") > 0).then_some(())
    });
    assert!(n(&ours, "total_net_repl_output_bytes") > 0);
    assert_eq!(n(&ours_replica, "total_net_repl_output_bytes"), 0);
}

/// What Sentinel reads beyond the defaults: with `replica-announce-ip`
/// and `-port` the master lists the announced address in `slaveN:`,
/// `replica-announced no` reads `replica_announced:0`, and
/// `min-replicas-to-write` adds `min_slaves_good_slaves` on a master and
/// on a replica alike, field for field as Redis prints them.
#[test]
fn announced_replicas_and_min_replicas_print_what_redis_prints() {
    let master_args = ["--min-replicas-to-write", "1"];
    let replica_args = [
        "--replica-announce-ip",
        "127.0.0.2",
        "--replica-announce-port",
        "4321",
        "--replica-announced",
        "no",
        "--min-replicas-to-write",
        "2",
    ];
    let ours = ServerProcess::ferrokv(&master_args);
    let real = ServerProcess::redis(&master_args);
    let ours_replica = ServerProcess::ferrokv(&replica_args);
    let real_replica = ServerProcess::redis(&replica_args);
    let mut seen = Vec::new();
    for (m, r) in [(&ours, &ours_replica), (&real, &real_replica)] {
        r.raw()
            .cmd(&["REPLICAOF", "127.0.0.1", &m.port.to_string()]);
        let line = wait_for("the replica online", 20, || {
            m.info_field("replication", "slave0")
                .filter(|s| s.contains("state=online"))
        });
        // ip, port and state; the offset and lag are the moment's.
        let addr: Vec<String> = line.split(',').take(3).map(str::to_string).collect();
        let f = |p: &ServerProcess, k: &str| p.info_field("replication", k);
        seen.push((
            addr,
            f(r, "replica_announced"),
            f(m, "min_slaves_good_slaves"),
            f(r, "min_slaves_good_slaves"),
            f(r, "slave_priority"),
        ));
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(
        seen[0].0,
        ["ip=127.0.0.2", "port=4321", "state=online"].map(String::from)
    );
    assert_eq!(seen[0].1.as_deref(), Some("0"));
    assert_eq!(seen[0].2.as_deref(), Some("1"));
    compare(&ours, &real, "master with min-replicas");
    compare(&ours_replica, &real_replica, "announced replica");
    assert_eq!(
        ours_replica
            .raw()
            .cmd(&["CONFIG", "GET", "replica-announce-port"]),
        real_replica
            .raw()
            .cmd(&["CONFIG", "GET", "replica-announce-port"])
    );
}

#[test]
fn sections_come_in_redis_order_and_cluster_says_disabled() {
    let ours = ServerProcess::ferrokv(&[]);
    let real = ServerProcess::redis(&[]);
    for p in [&ours, &real] {
        let headers: Vec<String> = fields(&info(p, "keyspace"))
            .into_iter()
            .chain(fields(&info(p, "cluster")))
            .filter(|(_, k)| k.is_none())
            .map(|(s, _)| s)
            .collect();
        assert_eq!(headers, ["Keyspace", "Cluster"]);
        // Several at once: Redis's order, whatever order they were asked in.
        let reply = p.raw().cmd(&["INFO", "keyspace", "cluster", "server"]);
        let text = String::from_utf8_lossy(reply.as_bytes().unwrap()).into_owned();
        let order: Vec<String> = fields(&text)
            .into_iter()
            .filter(|(_, k)| k.is_none())
            .map(|(s, _)| s)
            .collect();
        assert_eq!(order, ["Server", "Cluster", "Keyspace"]);
        assert_eq!(
            p.info_field("cluster", "cluster_enabled").as_deref(),
            Some("0")
        );
        let modules = info(p, "modules");
        assert_eq!(modules.trim(), "# Modules");
    }
}

#[test]
fn the_memory_breakdown_adds_up() {
    let p = ServerProcess::ferrokv(&[]);
    let mut r = p.raw();
    // About 8 MB of values.
    for i in 0..2000 {
        r.cmd(&["SET", &format!("big:{i}"), &"x".repeat(4000)]);
    }
    let n = |f: &str| -> i64 {
        p.info_field("memory", f)
            .unwrap()
            .trim()
            .trim_end_matches('%')
            .parse::<f64>()
            .unwrap() as i64
    };
    let (used, overhead, dataset, startup) = (
        n("used_memory"),
        n("used_memory_overhead"),
        n("used_memory_dataset"),
        n("used_memory_startup"),
    );
    // Read one at a time: used_memory moves a little between them.
    assert!(
        (used - overhead - dataset).abs() < 256 * 1024,
        "{used} {overhead} {dataset}"
    );
    assert!(startup > 0 && startup <= overhead);
    assert!(dataset > 8_000_000, "dataset {dataset}");
    assert!(n("used_memory_dataset_perc") > 50);
    assert!(n("allocator_active") >= n("allocator_allocated"));
}
