//! Guards high availability under the real Redis Sentinel: three
//! `redis-sentinel` 7.0 processes (Debian's, the same build as
//! `redis-server`) monitor ferrokv masters and replicas on loopback, with
//! short `down-after-milliseconds` and `failover-timeout`.
//!
//! - The sentinels discover the replicas from the master's `INFO` and
//!   each other through hello messages on `__sentinel__:hello`, and agree
//!   (`get-master-addr-by-name`, `SENTINEL replicas`, `SENTINEL sentinels`).
//! - `kill -9` of the master ends in a promoted replica (one answering
//!   `-MASTERDOWN` meanwhile, with `replica-serve-stale-data no`), the other replica
//!   replicating from it, both configuration files rewritten, and the old
//!   master, restarted from its file, converted to a replica.
//! - `SENTINEL FAILOVER` does the same without a kill, and `replica-priority
//!   0` keeps a replica from being chosen.
//! - Mixed sets: a real redis-server replica among ferrokv nodes is
//!   promoted and a ferrokv replica follows it; a ferrokv replica of a real
//!   redis-server master is promoted and Redis follows it.
//! - A master restarting and loading for longer than down-after answers
//!   `-LOADING`, which Sentinel counts as reachable: no failover.
//! - A master partitioned from its replicas and the sentinels (a relay
//!   cut) but not from a client refuses that client's writes with
//!   `min-replicas-to-write`, and rejoins as a replica when healed.
//! - Restricted ACL users: the sentinels log in as the user Redis's
//!   documentation gives them, the replicas log in to their master as a
//!   replication-only user.
//! - Over TLS: nodes serving and replicating over TLS, sentinels with
//!   `tls-replication yes`, certificates checked both ways.
//! - A script busy past `busy-reply-threshold` on the master makes its
//!   `PING`s answer `-BUSY`; Sentinel sends `SCRIPT KILL`, and the master
//!   is back.
//! - redis-py's `Sentinel(...).master_for()` keeps writing through the
//!   failover; every write `WAIT` acknowledged on all replicas is on the new
//!   master (`clients/redis_py_sentinel.py`).
//!
//! One scenario runs at a time: sentinels judge instances by the clock,
//! and scenarios side by side on a loaded 2-core machine would fail over
//! when nothing failed.
mod common;
#[path = "common/pki.rs"]
mod pki;
use common::{wait_for, ServerProcess};
use pki::{Pair, Pki};
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const NAME: &str = "mymaster";
const DOWN_AFTER_MS: u64 = 1500;
const FAILOVER_TIMEOUT_MS: u64 = 6000;
/// Time allowed for a failover or a conversion to be seen.
const FAILOVER_SECS: u64 = 60;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Ferrokv,
    Redis,
}

/// A data node started from a configuration file of its own, so that the
/// `CONFIG REWRITE` Sentinel sends has a file to write and a restart reads
/// what was written.
struct Node {
    p: ServerProcess,
    kind: Kind,
    conf: PathBuf,
    /// The default user's password, when the node has one.
    password: Option<&'static str>,
    /// Whether it serves TLS on `p.free_port` with `tls-replication yes`.
    tls: bool,
    _conf_dir: tempfile::TempDir,
}

impl Node {
    fn start(kind: Kind, lines: &[&str]) -> Node {
        Self::start_auth(kind, lines, None)
    }

    /// A ferrokv node with its `/metrics` endpoint on `p.free_port`.
    fn with_metrics(lines: &[&str]) -> Node {
        Self::start_full(
            Kind::Ferrokv,
            lines,
            None,
            &["--metrics-port", common::FREE_PORT],
        )
    }

    /// A ferrokv node serving TLS with `pair` (also its client certificate
    /// on its link to a master), replicating over TLS.
    fn with_tls(pki: &Pki, pair: &Pair) -> Node {
        Self::start_full(
            Kind::Ferrokv,
            &[],
            None,
            &[
                "--tls-port",
                common::FREE_PORT,
                "--tls-cert-file",
                path_str(&pair.cert),
                "--tls-key-file",
                path_str(&pair.key),
                "--tls-ca-cert-file",
                path_str(&pki.ca_file()),
                "--tls-replication",
                "yes",
            ],
        )
    }

    fn start_auth(kind: Kind, lines: &[&str], password: Option<&'static str>) -> Node {
        Self::start_full(kind, lines, password, &[])
    }

    fn start_full(
        kind: Kind,
        lines: &[&str],
        password: Option<&'static str>,
        extra: &[&str],
    ) -> Node {
        let conf_dir = tempfile::tempdir().unwrap();
        let conf = conf_dir.path().join("node.conf");
        let mut text = lines.join("\n");
        text.push('\n');
        std::fs::write(&conf, text).unwrap();
        let path = conf.to_str().unwrap();
        let p = match kind {
            Kind::Ferrokv => {
                let mut args = vec!["--save", ""];
                args.extend_from_slice(extra);
                ServerProcess::ferrokv_with_conf(path, &args)
            }
            Kind::Redis => ServerProcess::redis_with_conf(path),
        };
        Node {
            tls: extra.contains(&"--tls-replication"),
            p,
            kind,
            conf,
            password,
            _conf_dir: conf_dir,
        }
    }

    /// The port Sentinel knows the node by: its TLS port when it has one
    /// (the harness's own connections stay on the plain `p.port`).
    fn port(&self) -> u16 {
        if self.tls {
            self.p.free_port.unwrap()
        } else {
            self.p.port
        }
    }

    fn con(&self) -> redis::RedisResult<redis::Connection> {
        let url = match self.password {
            Some(pw) => format!("redis://default:{pw}@127.0.0.1:{}/", self.p.port),
            None => format!("redis://127.0.0.1:{}/", self.p.port),
        };
        let c = redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        Ok(c)
    }

    /// `INFO replication` as fields; empty when the node does not answer.
    fn replication(&self) -> HashMap<String, String> {
        let Ok(mut c) = self.con() else {
            return HashMap::new();
        };
        let text: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut c)
            .unwrap_or_default();
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn is_master(&self) -> bool {
        self.replication().get("role").map(String::as_str) == Some("master")
    }

    /// A replica of `master_port` with its link up.
    fn follows(&self, master_port: u16) -> bool {
        let r = self.replication();
        r.get("role").map(String::as_str) == Some("slave")
            && r.get("master_port") == Some(&master_port.to_string())
            && r.get("master_link_status").map(String::as_str) == Some("up")
    }

    fn replicaof_port(&self, port: u16) {
        let mut c = self.con().unwrap();
        let _: String = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(port)
            .query(&mut c)
            .unwrap();
    }

    fn conf_text(&self) -> String {
        std::fs::read_to_string(&self.conf).unwrap()
    }

    fn log(&self) -> String {
        format!(
            "--- {:?} node {} log\n{}",
            self.kind,
            self.port(),
            self.p.log()
        )
    }
}

/// One `redis-sentinel` process with its own configuration file.
struct Sentinel {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Sentinel {
    fn start(master_port: u16, quorum: u32, extra: &[String]) -> Sentinel {
        for _attempt in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let mut conf = format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {NAME} 127.0.0.1 {master_port} {quorum}\n\
                 sentinel down-after-milliseconds {NAME} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {NAME} {FAILOVER_TIMEOUT_MS}\n\
                 sentinel parallel-syncs {NAME} 1\n",
                dir.path().display()
            );
            for l in extra {
                conf.push_str(l);
                conf.push('\n');
            }
            let path = dir.path().join("sentinel.conf");
            std::fs::write(&path, conf).unwrap();
            let log = std::fs::File::create(dir.path().join("sentinel.log")).unwrap();
            let child = Command::new("redis-sentinel")
                .arg(&path)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log))
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("cannot start redis-sentinel: {e} (Debian's redis-sentinel package)")
                });
            let mut s = Sentinel { child, port, dir };
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = s.child.try_wait() {
                    break;
                }
                if s.query::<String>(&["PING"]).is_ok() {
                    return s;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!("sentinel did not start on port {port}: {}", s.log());
        }
        panic!("could not start redis-sentinel");
    }

    fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        let mut c = client.get_connection_with_timeout(Duration::from_secs(5))?;
        c.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut c)
    }

    /// `SENTINEL get-master-addr-by-name`: the port it names.
    fn master_port(&self) -> Option<u16> {
        let addr: Vec<String> = self
            .query(&["SENTINEL", "get-master-addr-by-name", NAME])
            .ok()?;
        addr.get(1)?.parse().ok()
    }

    /// `SENTINEL replicas` or `SENTINEL sentinels`: one map per entry.
    fn entries(&self, what: &str) -> Vec<HashMap<String, String>> {
        let rows: Vec<Vec<String>> = self.query(&["SENTINEL", what, NAME]).unwrap_or_default();
        rows.into_iter()
            .map(|r| {
                r.chunks(2)
                    .filter(|kv| kv.len() == 2)
                    .map(|kv| (kv[0].clone(), kv[1].clone()))
                    .collect()
            })
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Nodes and the three sentinels watching them.
struct Ha {
    nodes: Vec<Node>,
    sentinels: Vec<Sentinel>,
}

impl Ha {
    /// `nodes[0]` is the master; the others are made its replicas; then
    /// three sentinels (quorum 2) start and must agree on everything.
    fn start(nodes: Vec<Node>, sentinel_extra: &[String]) -> Ha {
        Self::start_with(nodes, |_| sentinel_extra.to_vec())
    }

    /// As `start`, with sentinel `i`'s extra configuration lines from
    /// `extra(i)`.
    fn start_with(nodes: Vec<Node>, extra: impl Fn(usize) -> Vec<String>) -> Ha {
        let m = nodes[0].port();
        Self::start_at(nodes, m, extra)
    }

    /// As `start_with`, with the replicas and sentinels reaching the master
    /// at port `m` (a [`Relay`] to it, say).
    fn start_at(nodes: Vec<Node>, m: u16, extra: impl Fn(usize) -> Vec<String>) -> Ha {
        for n in &nodes[1..] {
            n.replicaof_port(m);
        }
        let mut ha = Ha {
            nodes,
            sentinels: Vec::new(),
        };
        ha.wait("the replicas to sync", |ha| {
            ha.nodes[1..].iter().all(|n| n.follows(m))
        });
        for i in 0..3 {
            let s = Sentinel::start(m, 2, &extra(i));
            ha.sentinels.push(s);
        }
        ha.wait_agreement(m, ha.nodes.len() - 1);
        ha
    }

    fn port(&self, i: usize) -> u16 {
        self.nodes[i].port()
    }

    fn index_of(&self, port: u16) -> usize {
        self.nodes.iter().position(|n| n.port() == port).unwrap()
    }

    /// Waits for `cond`, failing with every node's and sentinel's log.
    fn wait(&self, what: &str, mut cond: impl FnMut(&Ha) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(FAILOVER_SECS);
        while Instant::now() < deadline {
            if cond(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("timed out waiting for {what}\n{}", self.logs());
    }

    fn logs(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            out.push_str(&n.log());
            out.push_str(&format!("--- its replication: {:?}\n", n.replication()));
        }
        for s in &self.sentinels {
            out.push_str(&format!("--- sentinel {} log\n{}", s.port, s.log()));
        }
        out
    }

    /// Every sentinel names `master` and lists `replicas` healthy replicas
    /// and the two other sentinels.
    fn wait_agreement(&self, master: u16, replicas: usize) {
        self.wait("the sentinels to agree", |ha| {
            ha.sentinels.iter().all(|s| {
                let reps = s.entries("replicas");
                s.master_port() == Some(master)
                    && reps.len() == replicas
                    && reps.iter().all(|r| {
                        r.get("flags").map(String::as_str) == Some("slave")
                            && r.get("master-link-status").map(String::as_str) == Some("ok")
                            && r.get("master-port") == Some(&master.to_string())
                    })
                    && s.entries("sentinels").len() == 2
            })
        });
    }

    /// Waits until all sentinels name one master other than `old` and that
    /// node reports `role:master`; returns its index.
    fn wait_new_master(&self, old: u16) -> usize {
        let mut found = None;
        self.wait("a promoted replica", |ha| {
            let ports: Vec<Option<u16>> = ha.sentinels.iter().map(|s| s.master_port()).collect();
            match ports[0] {
                Some(p) if p != old && ports.iter().all(|q| *q == Some(p)) => {
                    let i = ha.index_of(p);
                    found = Some(i);
                    ha.nodes[i].is_master()
                }
                _ => false,
            }
        });
        found.unwrap()
    }

    /// `SENTINEL FAILOVER` on sentinel `i`, again while the previous
    /// failover is still ending (`-INPROG`) or no replica is eligible yet
    /// (`-NOGOODSLAVE`: fresh INFO needed).
    fn manual_failover(&self, i: usize) {
        let mut last = String::new();
        self.wait("SENTINEL FAILOVER to be accepted", |ha| {
            match ha.sentinels[i].query::<String>(&["SENTINEL", "FAILOVER", NAME]) {
                Ok(r) => r == "OK",
                Err(e) => {
                    last = e.to_string();
                    assert!(
                        last.contains("INPROG") || last.contains("NOGOODSLAVE"),
                        "{last}"
                    );
                    false
                }
            }
        });
    }

    fn sentinel_logs_contain(&self, event: &str) -> bool {
        self.sentinels.iter().any(|s| s.log().contains(event))
    }
}

/// Writes `n` keys on the master, each acknowledged by `WAIT` on all
/// `replicas`.
fn write_acked(master: &Node, n: usize, replicas: usize) {
    let mut c = master.con().unwrap();
    for i in 0..n {
        let _: () = redis::cmd("SET")
            .arg(format!("key:{i}"))
            .arg(i)
            .query(&mut c)
            .unwrap();
        let got: usize = redis::cmd("WAIT")
            .arg(replicas)
            .arg(5000)
            .query(&mut c)
            .unwrap();
        assert_eq!(got, replicas, "WAIT after key:{i}");
    }
}

fn assert_has_keys(node: &Node, n: usize) {
    let mut c = node.con().unwrap();
    for i in 0..n {
        let v: Option<String> = redis::cmd("GET")
            .arg(format!("key:{i}"))
            .query(&mut c)
            .unwrap();
        assert_eq!(
            v.as_deref(),
            Some(i.to_string().as_str()),
            "key:{i} on {:?} node {}",
            node.kind,
            node.port()
        );
    }
}

fn path_str(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn ferrokv(lines: &[&str]) -> Node {
    Node::start(Kind::Ferrokv, lines)
}

fn redis_node(lines: &[&str]) -> Node {
    Node::start(Kind::Redis, lines)
}

/// Kills the master, waits for the promotion and the other replicas to
/// follow, restarts the old master from its file and waits for it to be
/// converted. Returns the new master's index.
fn kill_master_and_recover(ha: &mut Ha, keys: usize) -> usize {
    kill_master_and_recover_checking(ha, keys, |_| {})
}

/// As `kill_master_and_recover`, running `meanwhile` right after the kill,
/// before any promotion can happen (down-after has not passed).
fn kill_master_and_recover_checking(ha: &mut Ha, keys: usize, meanwhile: impl Fn(&Ha)) -> usize {
    let old = ha.port(0);
    let _ = ha.nodes[0].p.child.kill();
    let _ = ha.nodes[0].p.child.wait();
    let t0 = Instant::now();
    meanwhile(ha);
    let new = ha.wait_new_master(old);
    let promoted_after = t0.elapsed();
    let np = ha.port(new);
    let others: Vec<usize> = (1..ha.nodes.len()).filter(|&i| i != new).collect();
    ha.wait("the other replicas to follow the new master", |ha| {
        others.iter().all(|&i| ha.nodes[i].follows(np))
    });
    eprintln!(
        "promoted {:?} node {np} {:.1} s after the kill",
        ha.nodes[new].kind,
        promoted_after.as_secs_f64()
    );
    assert_has_keys(&ha.nodes[new], keys);
    // Sentinel's CONFIG REWRITE: the promoted node's file has no
    // `replicaof` any more, the others' name the new master.
    let promoted_conf = ha.nodes[new].conf_text();
    assert!(
        !promoted_conf.contains("\nreplicaof ") && !promoted_conf.contains("\nslaveof "),
        "{promoted_conf}"
    );
    for &i in &others {
        let conf = ha.nodes[i].conf_text();
        assert!(
            conf.contains(&format!("replicaof 127.0.0.1 {np}")),
            "{:?} node {}: {conf}",
            ha.nodes[i].kind,
            ha.port(i)
        );
    }
    // The old master comes back from its file as a master and is turned
    // into a replica of the new one.
    ha.nodes[0].p.kill_and_restart();
    ha.wait("the old master to be converted", |ha| {
        ha.nodes[0].follows(np)
    });
    assert!(ha.sentinel_logs_contain("+convert-to-slave"));
    assert_has_keys(&ha.nodes[0], keys);
    ha.wait_agreement(np, ha.nodes.len() - 1);
    new
}

#[test]
fn kill_9_of_a_ferrokv_master_promotes_a_replica_and_converts_the_old_master() {
    let _g = serial();
    // With `replica-serve-stale-data no` the replicas answer Sentinel's
    // PINGs `-MASTERDOWN` once the master is gone, which Sentinel must
    // still count as reachable to promote one of them.
    let nodes = (0..3)
        .map(|_| Node::with_metrics(&["replica-serve-stale-data no"]))
        .collect();
    let mut ha = Ha::start(nodes, &[]);
    // What the sentinels found: the replicas at their listening ports, with
    // the fields Sentinel parses from their INFO.
    let reps = ha.sentinels[0].entries("replicas");
    let mut ports: Vec<String> = reps.iter().map(|r| r["port"].clone()).collect();
    ports.sort();
    let mut want = vec![ha.port(1).to_string(), ha.port(2).to_string()];
    want.sort();
    assert_eq!(ports, want);
    for r in &reps {
        assert_eq!(r["slave-priority"], "100");
        assert_eq!(r["role-reported"], "slave");
        assert_eq!(r["runid"].len(), 40, "{r:?}");
    }
    write_acked(&ha.nodes[0], 100, 2);
    // The replicas answer -MASTERDOWN once their link is gone, and are
    // still promoted: Sentinel counts that reply as reachable.
    let new = kill_master_and_recover_checking(&mut ha, 100, |ha| {
        let deadline = Instant::now() + Duration::from_millis(DOWN_AFTER_MS);
        loop {
            let mut c = ha.nodes[1].con().unwrap();
            match redis::cmd("PING").query::<String>(&mut c) {
                Err(e) if e.to_string().contains("Link with MASTER is down") => break,
                r => assert!(
                    Instant::now() < deadline,
                    "PING on a cut-off replica: {r:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    assert!(new == 1 || new == 2);
    assert!(ha.sentinel_logs_contain("+failover-end"));
    // Each node counted its own role change: the promoted replica, the
    // replica re-pointed to it, the old master (a new process) demoted.
    let other = 3 - new;
    for (i, change) in [(new, "promoted"), (other, "switched"), (0, "demoted")] {
        let port = ha.nodes[i].p.free_port.unwrap();
        let series = format!("ferrokv_replication_role_changes_total{{change=\"{change}\"}}");
        wait_for(&series, 10, || {
            let text = common::scrape_metrics(port);
            (common::metric_value(&text, &series).as_deref() == Some("1")).then_some(())
        });
    }
}

#[test]
fn sentinel_failover_command_switches_and_skips_priority_zero() {
    let _g = serial();
    let mut ha = Ha::start(
        vec![
            ferrokv(&[]),
            ferrokv(&["replica-priority 0"]),
            ferrokv(&["replica-priority 50"]),
        ],
        &[],
    );
    let reps = ha.sentinels[0].entries("replicas");
    let p1 = ha.port(1).to_string();
    let prio: Vec<(&str, &str)> = reps
        .iter()
        .map(|r| (r["port"].as_str(), r["slave-priority"].as_str()))
        .collect();
    assert!(prio.contains(&(p1.as_str(), "0")), "{prio:?}");
    write_acked(&ha.nodes[0], 50, 2);
    let old = ha.port(0);
    ha.manual_failover(1);
    let new = ha.wait_new_master(old);
    assert_eq!(new, 2, "the priority-0 replica was promoted");
    let np = ha.port(2);
    // Both the other replica and the old master, still running, follow.
    ha.wait("the replica and the old master to follow", |ha| {
        ha.nodes[1].follows(np) && ha.nodes[0].follows(np)
    });
    assert!(ha.nodes[0].p.alive());
    assert_has_keys(&ha.nodes[2], 50);
    assert_has_keys(&ha.nodes[0], 50);
    ha.wait_agreement(np, 2);
    // Writes go on on the new master and reach everyone.
    write_acked(&ha.nodes[2], 10, 2);
    // A second manual failover picks the old master (the only candidate
    // with a non-zero priority).
    ha.manual_failover(0);
    let back = ha.wait_new_master(np);
    assert_eq!(back, 0);
    ha.wait("everyone to follow the first master again", |ha| {
        ha.nodes[1].follows(old) && ha.nodes[2].follows(old)
    });
}

#[test]
fn a_redis_replica_among_ferrokv_nodes_is_promoted_and_followed() {
    mixed_failover(
        vec![
            ferrokv(&[]),
            ferrokv(&["replica-priority 100"]),
            redis_node(&["replica-priority 10"]),
        ],
        Kind::Redis,
    );
}

/// A mixed set fails over after `kill -9` to the replica of kind `promoted`
/// (the priorities say which), and the others follow it.
fn mixed_failover(nodes: Vec<Node>, promoted: Kind) {
    let _g = serial();
    let mut ha = Ha::start(nodes, &[]);
    write_acked(&ha.nodes[0], 100, 2);
    let new = kill_master_and_recover(&mut ha, 100);
    assert_eq!(ha.nodes[new].kind, promoted);
}

#[test]
fn a_ferrokv_replica_of_a_redis_master_is_promoted_and_redis_follows() {
    mixed_failover(
        vec![
            redis_node(&[]),
            ferrokv(&["replica-priority 10"]),
            redis_node(&["replica-priority 100"]),
        ],
        Kind::Ferrokv,
    );
}

/// A master that crashes and comes back at once, then spends longer than
/// `down-after-milliseconds` loading its data set, answers `-LOADING`
/// meanwhile, which Sentinel counts as reachable: no failover, and the
/// replicas sync from it again once it has loaded (as with Redis; a server
/// that refused connections while loading would be failed over).
#[test]
fn a_master_loading_after_a_restart_is_not_failed_over() {
    let _g = serial();
    // 3000 keys at 1 ms each: about 3 s of loading, twice down-after.
    let mut ha = Ha::start(
        vec![
            ferrokv(&["key-load-delay 1000"]),
            ferrokv(&[]),
            ferrokv(&[]),
        ],
        &[],
    );
    let mut c = ha.nodes[0].con().unwrap();
    let mut mset = redis::cmd("MSET");
    for i in 0..3000 {
        mset.arg(format!("key:{i}")).arg(i);
    }
    let _: () = mset.query(&mut c).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    drop(c);
    let m = ha.port(0);
    let t0 = Instant::now();
    // Returns once INFO says loading:0.
    ha.nodes[0].p.kill_and_restart();
    let loaded_after = t0.elapsed();
    assert!(
        loaded_after > Duration::from_millis(2 * DOWN_AFTER_MS),
        "the load took only {loaded_after:?}"
    );
    ha.wait("the replicas to sync from the restarted master", |ha| {
        ha.nodes[1].follows(m) && ha.nodes[2].follows(m)
    });
    for s in &ha.sentinels {
        assert_eq!(s.master_port(), Some(m));
        let log = s.log();
        // The master's own log says when the new process started, listened
        // and loaded (a full run once saw an sdown of 0.5 s here).
        let master_log = || ha.nodes[0].p.log();
        assert!(
            !log.contains("+sdown master"),
            "{log}\nthe master's log:\n{}",
            master_log()
        );
        assert!(!log.contains("+switch-master"), "{log}");
    }
    let mut c = ha.nodes[1].con().unwrap();
    let n: usize = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 3000);
    eprintln!(
        "restarted master loaded in {:.1} s with no failover",
        loaded_after.as_secs_f64()
    );
}

/// A TCP relay on loopback to a node's port: the way the sentinels and
/// the replicas reach the master in the partition scenario, and what the
/// test cuts to isolate it from them while a client still reaches it
/// directly (traffic stays on 127.0.0.1; no network namespace needed).
struct Relay {
    port: u16,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(target: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (cut2, conns2) = (cut.clone(), conns.clone());
        std::thread::spawn(move || {
            for down in listener.incoming() {
                let Ok(down) = down else { continue };
                if cut2.load(Ordering::SeqCst) {
                    continue; // dropped: refused while partitioned
                }
                let Ok(up) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let mut held = conns2.lock().unwrap();
                held.push(down.try_clone().unwrap());
                held.push(up.try_clone().unwrap());
                let (d2, u2) = (down.try_clone().unwrap(), up.try_clone().unwrap());
                std::thread::spawn(move || pipe(down, up));
                std::thread::spawn(move || pipe(u2, d2));
            }
        });
        Relay { port, cut, conns }
    }

    /// Closes every relayed connection and refuses new ones.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}

/// The split brain `min-replicas-to-write` exists for: the master is cut
/// off from its replicas and the sentinels but not from a client. With
/// `min-replicas-to-write 1` and `min-replicas-max-lag 2`, it refuses that
/// client's writes (`-NOREPLICAS`) within the lag bound, so what it could
/// still acknowledge on its side (and lose when Sentinel converts it after
/// the partition heals) is bounded to the first seconds; every write
/// acknowledged by `WAIT` before the cut survives on the new master.
#[test]
fn a_partitioned_master_refuses_writes_under_min_replicas_and_rejoins() {
    let _g = serial();
    const MAX_LAG: u64 = 2;
    let lag = format!("min-replicas-max-lag {MAX_LAG}");
    let guard = ["min-replicas-to-write 1", lag.as_str()];
    let nodes = vec![ferrokv(&guard), ferrokv(&guard), ferrokv(&guard)];
    let relay = Relay::start(nodes[0].p.port);
    let ha = Ha::start_at(nodes, relay.port, |_| Vec::new());
    write_acked(&ha.nodes[0], 100, 2);
    let mut c = ha.nodes[0].con().unwrap();
    relay.cut();
    let cut_at = Instant::now();
    let (mut acked, mut refused, mut late) = (Vec::new(), 0, 0);
    let mut i = 0;
    let mut new = None;
    // Writes on the isolated side until the other side has a new master.
    while new.is_none() {
        let key = format!("split:{i}");
        match redis::cmd("SET").arg(&key).arg(i).query::<()>(&mut c) {
            Ok(()) => {
                if cut_at.elapsed() > Duration::from_secs(MAX_LAG + 1) {
                    late += 1;
                }
                acked.push(key);
            }
            Err(e) => {
                assert!(e.to_string().contains("NOREPLICAS"), "{e}");
                refused += 1;
            }
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(10));
        let ports: Vec<Option<u16>> = ha.sentinels.iter().map(|s| s.master_port()).collect();
        if let Some(p) = ports[0] {
            if p != relay.port && ports.iter().all(|q| *q == Some(p)) {
                new = Some(ha.index_of(p));
            }
        }
        assert!(
            cut_at.elapsed() < Duration::from_secs(FAILOVER_SECS),
            "no failover\n{}",
            ha.logs()
        );
    }
    assert_eq!(
        late, 0,
        "the isolated master took writes past the lag bound"
    );
    assert!(refused > 0);
    let new = new.unwrap();
    let np = ha.port(new);
    ha.wait("the new master promoted", |ha| ha.nodes[new].is_master());
    // The partition heals: Sentinel reaches the old master again and
    // converts it; it takes the new master's data.
    relay.heal();
    ha.wait("the old master converted", |ha| ha.nodes[0].follows(np));
    assert_has_keys(&ha.nodes[new], 100);
    assert_has_keys(&ha.nodes[0], 100);
    let mut nc = ha.nodes[new].con().unwrap();
    let lost = acked
        .iter()
        .filter(|k| {
            redis::cmd("EXISTS")
                .arg(k.as_str())
                .query::<i64>(&mut nc)
                .unwrap()
                == 0
        })
        .count();
    eprintln!(
        "partition: {} writes acknowledged by the isolated master (all within {MAX_LAG} s, {lost} lost), {refused} refused with NOREPLICAS",
        acked.len()
    );
}

/// The users of Redis's Sentinel documentation: the sentinels log in as a
/// user allowed only what Sentinel sends, the replicas as a replication
/// user; the default user has a password nobody else knows.
#[test]
fn sentinels_and_replicas_work_as_restricted_acl_users() {
    let _g = serial();
    let lines = [
        "user default on >adminpass ~* &* +@all",
        "user sentinel-user on >sentpass allchannels +multi +slaveof +ping +exec +subscribe +config|rewrite +role +publish +info +client|setname +client|kill +script|kill",
        "user replica-user on >replpass +psync +replconf +ping",
        "masteruser replica-user",
        "masterauth replpass",
    ];
    let node = || Node::start_auth(Kind::Ferrokv, &lines, Some("adminpass"));
    let extra = [
        format!("sentinel auth-user {NAME} sentinel-user"),
        format!("sentinel auth-pass {NAME} sentpass"),
    ];
    let mut ha = Ha::start(vec![node(), node(), node()], &extra);
    write_acked(&ha.nodes[0], 50, 2);
    kill_master_and_recover(&mut ha, 50);
    // Nothing was refused to the sentinels along the way.
    for n in &ha.nodes {
        let mut c = n.con().unwrap();
        let log: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut c).unwrap();
        let text = format!("{log:?}");
        assert!(!text.contains("sentinel-user"), "{text}");
    }
}

/// Everything over TLS: the nodes serve TLS and replicate over it, the
/// sentinels (`tls-replication yes`) reach the nodes and each other over
/// it, and a failover after `kill -9` goes as over TCP. Every certificate
/// is checked against the CA, both ways.
#[test]
fn sentinels_fail_over_ferrokv_nodes_over_tls() {
    let _g = serial();
    let pki = Pki::new("sentinel test CA");
    let pairs: Vec<Pair> = (0..4)
        .map(|i| {
            pki.issue(
                &format!("node{i}"),
                &["localhost", "127.0.0.1"],
                false,
                false,
            )
        })
        .collect();
    let nodes = pairs[..3].iter().map(|p| Node::with_tls(&pki, p)).collect();
    let extra = [
        format!("tls-port {}", free_port()),
        format!("tls-cert-file {}", pairs[3].cert.display()),
        format!("tls-key-file {}", pairs[3].key.display()),
        format!("tls-ca-cert-file {}", pki.ca_file().display()),
        "tls-replication yes".to_string(),
    ];
    // Each sentinel needs its own TLS port.
    let mut ha = Ha::start_with(nodes, |_| {
        let mut e = extra.to_vec();
        e[0] = format!("tls-port {}", free_port());
        e
    });
    write_acked(&ha.nodes[0], 50, 2);
    kill_master_and_recover(&mut ha, 50);
    // The sentinels' links arrive on each node's TLS port.
    for n in &ha.nodes {
        let mut c = n.con().unwrap();
        let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        let laddr = format!("laddr=127.0.0.1:{}", n.port());
        assert!(
            clients
                .lines()
                .any(|l| l.contains("name=sentinel-") && l.contains(&laddr)),
            "no sentinel link on the TLS port {}: {clients}",
            n.port()
        );
    }
}

/// A script busy past `busy-reply-threshold` answers Sentinel's PINGs with
/// `-BUSY`; once the master is subjectively down Sentinel sends `SCRIPT
/// KILL`, the script ends and the master is up again. One sentinel with
/// quorum 2: it can never fail over on its own.
#[test]
fn a_busy_script_on_the_master_is_killed_by_sentinel() {
    let _g = serial();
    let master = ferrokv(&["busy-reply-threshold 100"]);
    let sentinel = Sentinel::start(master.port(), 2, &[]);
    wait_for("the sentinel to see the master", 20, || {
        let m: Vec<Vec<String>> = sentinel.query(&["SENTINEL", "masters"]).ok()?;
        let flags = m.first()?.windows(2).find(|kv| kv[0] == "flags")?[1].clone();
        (flags == "master").then_some(())
    });
    let mut c = master.con().unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let t0 = Instant::now();
    let r: redis::RedisResult<()> = redis::cmd("EVAL")
        .arg("while true do end")
        .arg(0)
        .query(&mut c);
    let err = r
        .expect_err("the script ends only by SCRIPT KILL")
        .to_string();
    assert!(err.contains("Script killed by user"), "{err}");
    assert!(
        sentinel.log().contains("+sdown master"),
        "{}",
        sentinel.log()
    );
    eprintln!(
        "script killed by the sentinel after {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    wait_for("the master back up", 20, || {
        sentinel.log().contains("-sdown master").then_some(())
    });
}

#[test]
fn redis_py_sentinel_client_writes_through_a_failover() {
    let _g = serial();
    let ha = Ha::start(vec![ferrokv(&[]), ferrokv(&[]), ferrokv(&[])], &[]);
    let ports: Vec<String> = ha.sentinels.iter().map(|s| s.port.to_string()).collect();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/redis_py_sentinel.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .arg(ports.join(","))
        .arg(ha.nodes[0].p.child.id().to_string())
        .output()
        .expect("python3 with redis-py is required");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("sentinel client: OK"),
        "{text}\n{}",
        ha.logs()
    );
    eprintln!("{text}");
}
