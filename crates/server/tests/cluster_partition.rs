//! A network partition of a real mixed cluster: six hosts in their own
//! network namespaces on one bridge (tests/common/netns.rs), three masters
//! (ferrokv, redis-server 7.0, ferrokv) and a replica of each (ferrokv,
//! ferrokv, redis-server). One ferrokv master is cut off the bridge: the
//! majority side marks it FAIL and elects its replica (with the votes of a
//! ferrokv and a redis master), and serves every slot and every write
//! acknowledged before the cut; the isolated master refuses writes with
//! `CLUSTERDOWN`. Joined back, the old master sees the newer config epoch
//! of its slots and turns into a replica of the node that replaced it,
//! with the writes made meanwhile.
//!
//! Each host runs its node on port 7000 (bus 17000); the test reaches a
//! node through redis-cli run inside that host's namespace.
mod common;
use common::netns::Net;
use common::wait_for;
use std::process::Child;

const PORT: &str = "7000";

struct Host {
    child: Child,
    dir: tempfile::TempDir,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(net: &Net, h: usize, redis: bool) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let addr = net.addr(h);
    let bind = format!("{addr} 127.0.0.1");
    let args = vec![
        "--port",
        PORT,
        "--bind",
        &bind,
        "--dir",
        &d,
        "--save",
        "",
        "--appendonly",
        "no",
        "--cluster-enabled",
        "yes",
        "--cluster-node-timeout",
        "2000",
        "--enable-debug-command",
        "yes",
        // The other hosts are not loopback.
        "--protected-mode",
        "no",
    ];
    let bin = if redis {
        "redis-server"
    } else {
        env!("CARGO_BIN_EXE_ferrokv-server")
    };
    let child = net.spawn(h, bin, &args, &dir.path().join("server.log"));
    net.wait_ping(h, 7000);
    Host { child, dir }
}

fn log(host: &Host) -> String {
    std::fs::read_to_string(host.dir.path().join("server.log")).unwrap_or_default()
}

/// redis-cli against host `h`'s own node.
fn cli(net: &Net, h: usize, args: &[&str]) -> String {
    let mut a = vec!["-p", PORT];
    a.extend_from_slice(args);
    net.cli(h, &a)
}

fn info_field(net: &Net, h: usize, field: &str) -> String {
    cli(net, h, &["CLUSTER", "INFO"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn myid(net: &Net, h: usize) -> String {
    cli(net, h, &["CLUSTER", "MYID"]).trim().to_string()
}

/// The line of node `id` in host `h`'s CLUSTER NODES.
fn line_of(net: &Net, h: usize, id: &str) -> String {
    cli(net, h, &["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_default()
        .to_string()
}

fn wait_state(net: &Net, hosts: &[usize], state: &str) {
    for &h in hosts {
        wait_for(&format!("cluster_state:{state} on host {h}"), 40, || {
            (info_field(net, h, "cluster_state") == state).then_some(())
        });
    }
}

fn check_clean(net: &Net, from: usize) {
    let entry = format!("{}:{PORT}", net.addr(from));
    wait_for("a clean --cluster check", 40, || {
        let out = net.cli(from, &["--cluster", "check", &entry]);
        (out.contains("[OK] All nodes agree about slots configuration.")
            && out.contains("[OK] All 16384 slots covered.")
            && !out.contains("[ERR]")
            && !out.contains("[WARNING]"))
        .then_some(())
    });
}

/// A key of slot range `0..5461` (host 0's slots after `--cluster create`
/// of three masters), found with CLUSTER KEYSLOT.
fn keys_of_first_master(net: &Net, n: usize, tag: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut i = 0;
    while keys.len() < n {
        let k = format!("{tag}:{i}");
        let slot: u32 = cli(net, 1, &["CLUSTER", "KEYSLOT", &k])
            .trim()
            .parse()
            .unwrap();
        if slot < 5461 {
            keys.push(k);
        }
        i += 1;
    }
    keys
}

#[test]
fn a_partitioned_master_is_failed_over_by_the_majority_and_rejoins_as_a_replica() {
    let net = match Net::new(6) {
        Ok(n) => n,
        Err(why) => {
            // Only a machine that cannot make network namespaces (not root,
            // or a container without CAP_SYS_ADMIN) gets here.
            eprintln!("SKIPPED: cannot make network namespaces: {why}");
            return;
        }
    };
    // Masters 0 (ferrokv), 1 (redis), 2 (ferrokv); replicas 3 of 0
    // (ferrokv), 4 of 1 (ferrokv), 5 of 2 (redis).
    let kinds = [false, true, false, false, false, true];
    let hosts: Vec<Host> = kinds
        .iter()
        .enumerate()
        .map(|(h, &redis)| start(&net, h, redis))
        .collect();
    let ep = |h: usize| format!("{}:{PORT}", net.addr(h));
    let out = net.cli(
        1,
        &[
            "--cluster",
            "create",
            &ep(0),
            &ep(1),
            &ep(2),
            "--cluster-yes",
        ],
    );
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    for (r, m) in [(3, 0), (4, 1), (5, 2)] {
        let id = myid(&net, m);
        let out = net.cli(
            1,
            &[
                "--cluster",
                "add-node",
                &ep(r),
                &ep(m),
                "--cluster-slave",
                "--cluster-master-id",
                &id,
            ],
        );
        assert!(out.contains("[OK] New node added correctly."), "{out}");
    }
    let ids: Vec<String> = (0..6).map(|h| myid(&net, h)).collect();
    wait_for("replicas attached", 40, || {
        [(3, 0), (4, 1), (5, 2)]
            .iter()
            .all(|&(r, m)| line_of(&net, r, &ids[r]).contains(&format!("slave {}", ids[m])))
            .then_some(())
    });
    wait_state(&net, &[0, 1, 2, 3, 4, 5], "ok");
    check_clean(&net, 1);

    // Writes to the first master's slots, acknowledged by its replica.
    let before = keys_of_first_master(&net, 30, "before");
    for k in &before {
        let out = cli(&net, 0, &["SET", k, &format!("v-{k}")]);
        assert_eq!(out.trim(), "OK", "SET {k}: {out}");
    }
    let out = cli(&net, 0, &["WAIT", "1", "10000"]);
    assert_eq!(out.trim(), "1", "WAIT on the first master");

    // Host 0 is cut off.
    net.cut(0);
    // The majority marks it FAIL and elects its replica.
    wait_for("the replica of the cut master promoted", 60, || {
        let l = line_of(&net, 1, &ids[3]);
        l.contains("master").then_some(())
    });
    assert!(
        line_of(&net, 1, &ids[0]).contains("fail"),
        "the cut master is FAIL on the majority side: {}",
        line_of(&net, 1, &ids[0])
    );
    wait_state(&net, &[1, 2, 3, 4, 5], "ok");
    // The votes came from the other two masters, one of each kind (a
    // majority of three needs both).
    let vote = format!("Failover auth granted to {}", ids[3]);
    assert!(log(&hosts[1]).contains(&vote), "the redis master voted");
    assert!(log(&hosts[2]).contains(&vote), "the ferrokv master voted");
    // Every acknowledged write is served by the new master; new writes to
    // those slots are taken.
    for k in &before {
        let out = net.cli(1, &["-c", "-h", &net.addr(1), "-p", PORT, "GET", k]);
        assert_eq!(out.trim(), format!("v-{k}"), "GET {k} on the majority side");
    }
    let during = keys_of_first_master(&net, 20, "during");
    for k in &during {
        let out = net.cli(1, &["-c", "-h", &net.addr(1), "-p", PORT, "SET", k, "new"]);
        assert_eq!(out.trim(), "OK", "SET {k} on the majority side: {out}");
    }
    // The isolated master sees it lost the majority and refuses writes.
    wait_state(&net, &[0], "fail");
    let out = cli(&net, 0, &["SET", &before[0], "lost"]);
    assert!(
        out.starts_with("(error) CLUSTERDOWN") || out.starts_with("CLUSTERDOWN"),
        "write on the isolated master: {out}"
    );

    // Joined back: the old master follows the node that took its slots,
    // and gets the writes made meanwhile.
    net.heal(0);
    wait_for("the old master turned replica of its replica", 60, || {
        line_of(&net, 0, &ids[0])
            .contains(&format!("slave {}", ids[3]))
            .then_some(())
    });
    wait_state(&net, &[0, 1, 2, 3, 4, 5], "ok");
    wait_for("the old master in sync", 40, || {
        cli(&net, 0, &["INFO", "replication"])
            .contains("master_link_status:up")
            .then_some(())
    });
    // Its data is its new master's: the keys from before the cut and
    // those written during it (DBSIZE, and the digest of the whole set).
    wait_for("the old master holds its new master's data", 40, || {
        let (size, digest) = (
            cli(&net, 0, &["DBSIZE"]),
            cli(&net, 0, &["DEBUG", "DIGEST"]),
        );
        (size.trim() == (before.len() + during.len()).to_string()
            && digest == cli(&net, 3, &["DEBUG", "DIGEST"]))
        .then_some(())
    });
    check_clean(&net, 0);
    check_clean(&net, 1);
}
