//! The cluster bus over TLS (`tls-cluster yes`), mixed with redis-server
//! 7.0 nodes, whose bus then speaks only TLS: a cluster that forms, agrees
//! and fails over proves both directions of our TLS links (the ones we
//! open, with our client certificate, and the ones we accept). A plain
//! peer on our bus port is refused, and a peer whose certificate another
//! CA signed fails its handshake.
//!
//! Each node also keeps a plain port for the test's own queries; the
//! cluster is made and reached over the TLS ports (`redis-cli --tls`),
//! which are what the nodes announce.
mod common;
#[path = "common/pki.rs"]
mod pki;
use common::{free_port, wait_for, ServerProcess, FREE_PORT};
use pki::{Pair, Pki};
use std::io::{Read, Write};
use std::process::Command;

struct TlsNode {
    p: ServerProcess,
    tls_port: u16,
    /// ferrokv's /metrics port.
    metrics: u16,
}

fn node(redis: bool, pki: &Pki, pair: &Pair) -> TlsNode {
    let tls_port = free_port();
    let tp = tls_port.to_string();
    let (cert, key, ca) = (
        pair.cert.to_str().unwrap(),
        pair.key.to_str().unwrap(),
        pki.ca_file(),
    );
    let ca = ca.to_str().unwrap().to_string();
    let metrics = free_port();
    let mp = metrics.to_string();
    let mut args = vec![
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        FREE_PORT,
        "--cluster-node-timeout",
        "2000",
        "--tls-port",
        &tp,
        "--tls-cluster",
        "yes",
        "--tls-replication",
        "yes",
        "--tls-cert-file",
        cert,
        "--tls-key-file",
        key,
        "--tls-ca-cert-file",
        &ca,
    ];
    let p = if redis {
        ServerProcess::redis(&args)
    } else {
        args.extend_from_slice(&["--metrics-port", &mp]);
        ServerProcess::ferrokv(&args)
    };
    TlsNode {
        p,
        tls_port,
        metrics,
    }
}

/// redis-cli over TLS; stdout and stderr together.
fn tls_cli(pki: &Pki, pair: &Pair, args: &[&str]) -> String {
    let ca = pki.ca_file();
    let out = Command::new("redis-cli")
        .args([
            "--tls",
            "--cacert",
            ca.to_str().unwrap(),
            "--cert",
            pair.cert.to_str().unwrap(),
            "--key",
            pair.key.to_str().unwrap(),
        ])
        .args(args)
        .output()
        .expect("redis-cli is installed");
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}

fn plain_cli(n: &TlsNode, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &n.p.port.to_string()])
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn field(n: &TlsNode, name: &str) -> String {
    plain_cli(n, &["CLUSTER", "INFO"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn myid(n: &TlsNode) -> String {
    plain_cli(n, &["CLUSTER", "MYID"]).trim().to_string()
}

fn line_of(n: &TlsNode, id: &str) -> String {
    plain_cli(n, &["CLUSTER", "NODES"])
        .lines()
        .find(|l| l.starts_with(id))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_mixed_cluster_runs_its_bus_over_tls() {
    let pki = Pki::new("test CA");
    let pair = pki.server();
    // Masters ferrokv, redis, ferrokv; a ferrokv replica of the redis
    // master.
    let nodes: Vec<TlsNode> = [false, true, false, false]
        .iter()
        .map(|&r| node(r, &pki, &pair))
        .collect();
    let ep = |n: &TlsNode| format!("127.0.0.1:{}", n.tls_port);
    let out = tls_cli(
        &pki,
        &pair,
        &[
            "--cluster",
            "create",
            &ep(&nodes[0]),
            &ep(&nodes[1]),
            &ep(&nodes[2]),
            "--cluster-yes",
        ],
    );
    assert!(out.contains("[OK] All 16384 slots covered."), "{out}");
    let redis_id = myid(&nodes[1]);
    let out = tls_cli(
        &pki,
        &pair,
        &[
            "--cluster",
            "add-node",
            &ep(&nodes[3]),
            &ep(&nodes[1]),
            "--cluster-slave",
            "--cluster-master-id",
            &redis_id,
        ],
    );
    assert!(out.contains("[OK] New node added correctly."), "{out}");
    for n in &nodes {
        wait_for("cluster_state:ok", 40, || {
            (field(n, "cluster_state") == "ok" && field(n, "cluster_known_nodes") == "4")
                .then_some(())
        });
    }
    wait_for("a clean --cluster check over TLS", 40, || {
        let out = tls_cli(&pki, &pair, &["--cluster", "check", &ep(&nodes[0])]);
        (out.contains("[OK] All nodes agree about slots configuration.")
            && out.contains("[OK] All 16384 slots covered.")
            && !out.contains("[ERR]"))
        .then_some(())
    });
    // Writes follow MOVED to the TLS ports; the replica syncs over TLS.
    for i in 0..30 {
        let k = format!("k{i}");
        let port = nodes[0].tls_port.to_string();
        let out = tls_cli(&pki, &pair, &["-c", "-p", &port, "SET", &k, "v"]);
        assert_eq!(out.trim(), "OK", "SET {k}: {out}");
    }
    wait_for("the replica in sync over TLS", 40, || {
        nodes[3]
            .p
            .info_field("replication", "master_link_status")
            .filter(|s| s == "up")
    });
    let wait = tls_cli(
        &pki,
        &pair,
        &["-p", &nodes[1].tls_port.to_string(), "WAIT", "1", "10000"],
    );
    assert_eq!(wait.trim(), "1");

    // A plain-TCP peer on our bus port is not the bus: its link is closed
    // (the handshake fails) and the node goes on.
    let bus = |n: &TlsNode| n.p.free_port.expect("the bus port");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", bus(&nodes[0]))).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut msg = vec![0u8; 2256];
    msg[..4].copy_from_slice(b"RCmb");
    msg[4..8].copy_from_slice(&2256u32.to_be_bytes());
    let _ = s.write_all(&msg);
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    assert!(
        n == 0 || !buf.starts_with(b"RCmb"),
        "a plain bus message was answered on a TLS bus"
    );
    assert_eq!(field(&nodes[0], "cluster_state"), "ok");

    // The redis master dies: the ferrokv replica wins the election over
    // the TLS bus (the votes of both ferrokv masters).
    let replica_id = myid(&nodes[3]);
    let mut nodes = nodes;
    let _ = nodes[1].p.child.kill();
    let _ = nodes[1].p.child.wait();
    wait_for("the ferrokv replica promoted", 40, || {
        line_of(&nodes[0], &replica_id)
            .contains("master")
            .then_some(())
    });
    for i in [0, 2, 3] {
        wait_for("cluster_state:ok after the failover", 40, || {
            (field(&nodes[i], "cluster_state") == "ok").then_some(())
        });
    }
    let vote = format!("Failover auth granted to {replica_id}");
    assert!(nodes[0].p.log().contains(&vote) || nodes[2].p.log().contains(&vote));
    // The bus links were TLS: ferrokv counted their handshakes, and the
    // plain peer's failed one.
    let m = common::scrape_metrics(nodes[0].metrics);
    let count = |s: &str| {
        common::metric_value(&m, s)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(count("ferrokv_tls_handshakes_total") >= 4.0, "{m}");
    assert!(count("ferrokv_tls_handshake_failures_total") >= 1.0, "{m}");
}

/// A node whose certificate another CA signed cannot join: its bus
/// handshakes fail both ways, so it stays a stranger.
#[test]
fn a_node_with_a_foreign_certificate_cannot_join_the_tls_bus() {
    let pki = Pki::new("test CA");
    let other = Pki::new("other CA");
    let pair = pki.server();
    let stranger_pair = other.server();
    let a = node(false, &pki, &pair);
    let b = node(false, &other, &stranger_pair);
    let (port, bus) = (b.tls_port.to_string(), b.p.free_port.unwrap().to_string());
    let out = plain_cli(&a, &["CLUSTER", "MEET", "127.0.0.1", &port, &bus]);
    assert_eq!(out.trim(), "OK");
    // Both sides refuse the other's certificate, again at each retry.
    wait_for("refused handshakes on both sides", 20, || {
        [&a, &b]
            .iter()
            .all(|n| {
                let m = common::scrape_metrics(n.metrics);
                common::metric_value(&m, "ferrokv_tls_handshake_failures_total")
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
                    >= 1.0
            })
            .then_some(())
    });
    // The handshake node times out (node timeout 2 s); nobody joined.
    wait_for("the handshake node dropped", 20, || {
        (field(&a, "cluster_known_nodes") == "1").then_some(())
    });
    assert_eq!(field(&b, "cluster_known_nodes"), "1");
}
