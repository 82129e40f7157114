//! Guards the RDMA full sync (docs/rdma.md) with real processes on
//! 127.0.0.1 and libfabric's `tcp` provider: a ferrokv master pushes its
//! snapshot (every type the server has and a 50 MB value) into a ferrokv
//! replica's ring by write-with-immediate while writes keep coming, and the
//! two end with equal `DEBUG DIGEST`s and offsets; a real redis-server
//! master is unaffected by a replica offering `capa rdma`, and a real
//! redis-server replica by a master offering RDMA; a master killed
//! mid-transfer, a corrupted chunk and a replica killed mid-transfer end in
//! a TCP sync with the old data served meanwhile; an unknown token is
//! refused. Pacing (`rdma-chunk-delay-us`) makes "mid-transfer" reliable.
mod common;

use common::repl::*;
use common::{wait_for, ServerProcess};

use std::time::Duration;

/// A master offering RDMA on a free port of 127.0.0.1.
fn rdma_master(extra: &[&str]) -> ServerProcess {
    let mut args = vec![
        "--rdma-bind",
        "127.0.0.1",
        "--rdma-port",
        "0",
        "--repl-diskless-sync",
        "no",
    ];
    args.extend_from_slice(extra);
    ferrokv(&args)
}

/// A replica offering `capa rdma` with a small ring (many chunks).
fn rdma_replica(extra: &[&str]) -> ServerProcess {
    let mut args = vec![
        "--replica-rdma",
        "yes",
        "--rdma-chunk-size",
        "1mb",
        "--rdma-ring-slots",
        "4",
    ];
    args.extend_from_slice(extra);
    ferrokv(&args)
}

/// Writes of every type, so the stream buffered during a transfer is
/// non-trivial.
fn write_load(port: u16, rounds: usize, t: Types) {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    for r in 0..rounds {
        let mut pipe = redis::pipe();
        for j in 0..20 {
            pipe.cmd("SET")
                .arg(format!("w:{}", (r * 20 + j) % 700))
                .arg(r)
                .ignore();
            pipe.cmd("INCRBY").arg("ctr").arg(3).ignore();
        }
        pipe.cmd("DEL").arg(format!("k:{r}")).ignore();
        pipe.query::<()>(&mut c).unwrap();
        let k = (r % 13).to_string();
        if t.hash {
            try_cmd_str(&mut c, &["HSET", "h:load", &k, &r.to_string()]);
        }
        if t.list {
            try_cmd_str(&mut c, &["LPUSH", "l:load", &k]);
        }
        if t.set {
            try_cmd_str(&mut c, &["SADD", "s:load", &k]);
        }
        if t.zset {
            try_cmd_str(&mut c, &["ZINCRBY", "z:load", "1", &k]);
        }
    }
}

#[test]
fn full_sync_over_rdma_with_writes_during_the_transfer() {
    // ~55 MB in 1 MiB chunks, 20 ms apart: about a second of transfer.
    let master = rdma_master(&["--rdma-chunk-delay-us", "20000"]);
    assert_eq!(
        info(&master, "rdma", "rdma_available"),
        "1",
        "{}",
        master.log()
    );
    assert_eq!(info(&master, "rdma", "rdma_provider"), "tcp");
    fill_dataset(&master, 3000, true, types_of(&master));
    let replica = rdma_replica(&[]);
    assert_eq!(info(&replica, "rdma", "rdma_sync_state"), "idle");
    replicaof(&replica, &master);
    wait_for("the RDMA transfer to start", 60, || {
        (info(&master, "rdma", "rdma_sync_state") == "transferring").then_some(())
    });
    // Writes while the snapshot moves: buffered, streamed after rdma-done.
    write_load(master.port, 40, types_of(&master));
    wait_converged(&master, &replica, 60);
    write_load(master.port, 5, types_of(&master));
    wait_converged(&master, &replica, 20);
    let bytes = num(&replica, "rdma", "rdma_bytes");
    assert!(bytes > 50 * 1024 * 1024, "rdma_bytes {bytes}");
    assert_eq!(info(&replica, "rdma", "rdma_sync_state"), "done");
    assert_eq!(num(&replica, "rdma", "rdma_syncs_done"), 1);
    assert_eq!(num(&replica, "rdma", "rdma_fallbacks"), 0);
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 1);
    assert_eq!(num(&master, "rdma", "rdma_bytes"), bytes);
    assert_eq!(num(&master, "rdma", "rdma_transfers_in_flight"), 0);
    assert!(num(&master, "rdma", "rdma_credit_stalls") >= 0);
    // It went over RDMA, not TCP: the replica's log says so.
    let log = replica.log();
    assert!(log.contains("over RDMA"), "{log}");
    // The 50 MiB value spans many slots: it was filled in place as it
    // arrived (the digests above prove it is intact).
    assert!(log.contains("(1 large values filled in place)"), "{log}");
    // The temp file went with O_DIRECT wherever the file system takes it.
    let direct = direct_io_works(replica.dir.path());
    assert_eq!(
        info(&replica, "rdma", "rdma_last_sync_direct_io"),
        if direct { "1" } else { "0" }
    );
    let secs: f64 = info(&replica, "rdma", "rdma_last_sync_seconds")
        .parse()
        .unwrap();
    assert!(secs > 0.0 && secs < 60.0, "{secs}");
    let mut c = replica.client();
    let huge: Vec<u8> = redis::cmd("GET").arg("huge").query(&mut c).unwrap();
    assert_eq!(huge.len(), 50 * 1024 * 1024);
}

#[test]
fn replica_offering_rdma_to_a_real_redis_master_syncs_over_tcp() {
    let master = ServerProcess::redis(&["--repl-diskless-sync-delay", "0"]);
    let replica = rdma_replica(&[]);
    let t = types_of(&replica);
    fill_dataset(&master, 500, false, t);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 30);
    write_load(master.port, 5, t);
    wait_converged(&master, &replica, 20);
    assert_eq!(num(&replica, "rdma", "rdma_syncs_done"), 0);
    assert_eq!(num(&replica, "rdma", "rdma_fallbacks"), 0);
    assert_eq!(info(&replica, "rdma", "rdma_sync_state"), "idle");
    // Redis refuses `REPLCONF rdma-endpoint`: the link stays on TCP.
    assert_eq!(info(&replica, "rdma", "rdma_repl_link"), "tcp");
}

#[test]
fn master_killed_mid_transfer_keeps_old_data_then_tcp_sync() {
    let mut master = rdma_master(&["--rdma-chunk-delay-us", "50000"]);
    fill_dataset(&master, 100, true, types_of(&master));
    let replica = rdma_replica(&[]);
    let mut c = old_data_then_sync_until_transferring(&replica, &master);
    master.child.kill().unwrap();
    master.child.wait().unwrap();
    wait_for("the replica to see the master die", 20, || {
        (num(&replica, "rdma", "rdma_fallbacks") >= 1).then_some(())
    });
    assert_eq!(info(&replica, "rdma", "rdma_sync_state"), "failed");
    // Nothing installed: the old data still serves.
    let old: String = redis::cmd("GET").arg("old").query(&mut c).unwrap();
    assert_eq!(old, "data");
    let huge: Option<Vec<u8>> = redis::cmd("GET").arg("huge").query(&mut c).unwrap();
    assert!(huge.is_none());
    // A new master (RDMA offered too): the retry goes over plain TCP.
    let master2 = rdma_master(&[]);
    fill_dataset(&master2, 300, false, types_of(&master2));
    replicaof(&replica, &master2);
    wait_converged(&master2, &replica, 30);
    assert!(num(&replica, "rdma", "rdma_retries") >= 1);
    assert_eq!(num(&replica, "rdma", "rdma_syncs_done"), 0);
    assert_eq!(num(&master2, "rdma", "rdma_syncs_done"), 0);
    assert_eq!(info(&replica, "rdma", "rdma_repl_link"), "tcp");
    let gone: Option<String> = redis::cmd("GET").arg("old").query(&mut c).unwrap();
    assert!(gone.is_none());
}

/// Sets `old` = `data` on the replica, makes it sync from `master` and
/// waits until chunks are arriving; returns a client of the replica.
fn old_data_then_sync_until_transferring(
    replica: &ServerProcess,
    master: &ServerProcess,
) -> redis::Connection {
    let mut c = replica.client();
    let _: () = redis::cmd("SET")
        .arg("old")
        .arg("data")
        .query(&mut c)
        .unwrap();
    replicaof(replica, master);
    wait_for("chunks to reach the replica", 60, || {
        (info(replica, "rdma", "rdma_sync_state") == "transferring"
            && num(replica, "replication", "master_sync_read_bytes") > 0)
            .then_some(())
    });
    c
}

#[test]
fn a_sync_cancelled_with_a_deep_ring_and_a_lagging_loader_installs_nothing() {
    let master = rdma_master(&[]);
    fill_dataset(&master, 3000, true, types_of(&master));
    // 200 slots of 64 KiB, and a loader slowed to 2 ms a key: many slots
    // queue behind it when the sync is cancelled.
    let replica = rdma_replica(&[
        "--rdma-ring-slots",
        "200",
        "--rdma-chunk-size",
        "64kb",
        "--key-load-delay",
        "2000",
    ]);
    let mut c = old_data_then_sync_until_transferring(&replica, &master);
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut c)
        .unwrap();
    wait_for("the cancelled sync to end", 20, || {
        (num(&replica, "rdma", "rdma_fallbacks_cancelled") == 1).then_some(())
    });
    // Nothing installed, the old data serves, the temp file is gone.
    let old: String = redis::cmd("GET").arg("old").query(&mut c).unwrap();
    assert_eq!(old, "data");
    let dbsize: u64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(dbsize, 1);
    wait_for("the temp file to be removed", 10, || {
        let left: Vec<_> = std::fs::read_dir(replica.dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
            .collect();
        left.is_empty().then_some(())
    });
    assert_eq!(num(&replica, "rdma", "rdma_syncs_done"), 0);
    // The master saw the replica go and released the transfer.
    wait_for("the master to release the transfer", 30, || {
        (num(&master, "rdma", "rdma_transfers_in_flight") == 0).then_some(())
    });
}

#[test]
fn corrupted_chunk_is_caught_by_the_crc_and_the_retry_goes_over_tcp() {
    let master = rdma_master(&["--rdma-debug-corrupt-chunk", "2"]);
    fill_dataset(&master, 20000, false, types_of(&master));
    let replica = rdma_replica(&["--rdma-chunk-size", "64kb"]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 40);
    assert_eq!(
        num(&replica, "rdma", "rdma_fallbacks_crc_mismatch"),
        1,
        "{}",
        replica.log()
    );
    assert_eq!(num(&replica, "rdma", "rdma_syncs_done"), 0);
    assert!(num(&replica, "rdma", "rdma_retries") >= 1);
    let log = replica.log();
    assert!(log.contains("crc-mismatch"), "{log}");
    // The corrupted snapshot was never installed: the first sync to
    // finish is the TCP retry, after the mismatch.
    let mismatch = log.find("crc-mismatch").unwrap();
    assert!(log.contains("Finished with success"), "{log}");
    assert!(!log[..mismatch].contains("Finished with success"), "{log}");
    assert!(!log[..mismatch].contains("RDMA full sync done"), "{log}");
    assert_eq!(num(&master, "rdma", "rdma_transfers_in_flight"), 0);
}

#[test]
fn replica_killed_mid_transfer_master_releases_and_keeps_serving() {
    let master = rdma_master(&["--rdma-chunk-delay-us", "50000"]);
    fill_dataset(&master, 100, true, types_of(&master));
    let mut replica = rdma_replica(&[]);
    replicaof(&replica, &master);
    wait_for("the transfer to start", 60, || {
        (num(&replica, "replication", "master_sync_read_bytes") > 0).then_some(())
    });
    replica.child.kill().unwrap();
    replica.child.wait().unwrap();
    let mut master = master;
    std::thread::sleep(Duration::from_millis(300));
    assert!(master.alive(), "the master died: {}", master.log());
    wait_for("the master to release the transfer", 20, || {
        (num(&master, "rdma", "rdma_transfers_in_flight") == 0
            && num(&master, "rdma", "rdma_fallbacks") >= 1
            && num(&master, "replication", "connected_slaves") == 0)
            .then_some(())
    });
    let mut c = master.client();
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut c)
        .unwrap();
    // A fresh replica still syncs over RDMA.
    let replica2 = rdma_replica(&[]);
    let mut m = master.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdma-chunk-delay-us")
        .arg("0")
        .query(&mut m)
        .unwrap();
    replicaof(&replica2, &master);
    wait_converged(&master, &replica2, 60);
    assert_eq!(num(&replica2, "rdma", "rdma_syncs_done"), 1);
}

#[test]
fn connection_with_an_unknown_token_is_rejected() {
    let master = rdma_master(&[]);
    let endpoint: std::net::SocketAddr = info(&master, "rdma", "rdma_endpoint").parse().unwrap();
    let lib = ferrokv_fabric::Library::open_default().expect("libfabric");
    let ring = ferrokv_fabric::RingDescriptor {
        addr: 0,
        key: 1,
        slots: 1,
        slot_size: 4096,
        token: *b"not-a-real-token",
        lane: 0,
        lanes: 1,
    };
    let res = ferrokv_fabric::connect(
        &lib,
        Some("tcp"),
        endpoint,
        &ring.encode(),
        64,
        Duration::from_secs(5),
    );
    assert!(
        res.is_err(),
        "a connection with an unknown token was accepted"
    );
    wait_for("the rejection to be counted", 10, || {
        (num(&master, "rdma", "rdma_rejected_tokens") == 1).then_some(())
    });
    // The master serves on.
    let mut c = master.client();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}

#[test]
fn writes_past_the_output_limit_during_a_transfer_drop_the_replica_which_retries() {
    let master = rdma_master(&[
        "--rdma-chunk-delay-us",
        "50000",
        "--client-output-buffer-limit",
        "replica 256kb 0 0",
    ]);
    fill_dataset(&master, 100, true, types_of(&master));
    let replica = rdma_replica(&[]);
    replicaof(&replica, &master);
    wait_for("the RDMA transfer to start", 60, || {
        (info(&master, "rdma", "rdma_sync_state") == "transferring").then_some(())
    });
    // 1 MB of stream while the snapshot moves: over the 256 KB limit.
    let mut m = master.client();
    let value = vec![b'x'; 16 * 1024];
    for i in 0..64 {
        let _: () = redis::cmd("SET")
            .arg(format!("burst:{i}"))
            .arg(&value)
            .query(&mut m)
            .unwrap();
    }
    wait_for("the replica to be dropped", 20, || {
        (num(
            &master,
            "stats",
            "client_output_buffer_limit_disconnections",
        ) >= 1)
            .then_some(())
    });
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdma-chunk-delay-us")
        .arg("0")
        .query(&mut m)
        .unwrap();
    // The replica saw its RDMA transfer die and retries over TCP.
    wait_converged(&master, &replica, 60);
    assert!(num(&replica, "rdma", "rdma_fallbacks") >= 1);
    assert!(num(&replica, "rdma", "rdma_retries") >= 1);
    assert_eq!(num(&master, "rdma", "rdma_transfers_in_flight"), 0);
}

#[test]
fn chunks_go_through_the_bounce_ring_or_straight_from_the_mapping_as_configured() {
    // tcp needs no registered local buffers, so by default the master
    // writes from the snapshot's mapping; `rdma-zero-copy no` takes the
    // copy path that FI_MR_LOCAL providers (verbs) always take.
    let master = rdma_master(&["--rdma-zero-copy", "no"]);
    let t = types_of(&master);
    fill_dataset(&master, 3000, false, t);
    let a = rdma_replica(&["--rdma-chunk-size", "256kb"]);
    replicaof(&a, &master);
    wait_converged(&master, &a, 60);
    assert_eq!(num(&a, "rdma", "rdma_syncs_done"), 1, "{}", a.log());
    assert!(
        master.log().contains("copying into the bounce ring"),
        "{}",
        master.log()
    );
    let mut c = master.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("rdma-zero-copy")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    write_load(master.port, 3, t);
    let b = rdma_replica(&["--rdma-chunk-size", "256kb"]);
    replicaof(&b, &master);
    wait_converged(&master, &b, 60);
    wait_converged(&master, &a, 20);
    assert_eq!(num(&b, "rdma", "rdma_syncs_done"), 1, "{}", b.log());
    assert!(
        master.log().contains("written from the mapping, no copy"),
        "{}",
        master.log()
    );
}

#[test]
fn two_replicas_sync_over_rdma_at_once() {
    let master = rdma_master(&["--rdma-chunk-delay-us", "5000"]);
    let t = types_of(&master);
    fill_dataset(&master, 5000, false, t);
    let a = rdma_replica(&[]);
    let b = rdma_replica(&["--rdma-chunk-size", "64kb", "--rdma-ring-slots", "2"]);
    replicaof(&a, &master);
    replicaof(&b, &master);
    write_load(master.port, 10, t);
    wait_converged(&master, &a, 60);
    wait_converged(&master, &b, 60);
    assert_eq!(num(&a, "rdma", "rdma_syncs_done"), 1);
    assert_eq!(num(&b, "rdma", "rdma_syncs_done"), 1);
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 2);
}

/// Whether an aligned `O_DIRECT` write works in `dir`'s file system.
fn direct_io_works(dir: &std::path::Path) -> bool {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join("direct-probe");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path);
    let page = memmap2::MmapMut::map_anon(4096).unwrap();
    let ok = file.and_then(|mut f| f.write_all(&page)).is_ok();
    let _ = std::fs::remove_file(&path);
    ok
}

#[test]
fn metrics_endpoint_shows_the_rdma_figures() {
    // A fresh metrics port at each start attempt (see common::FREE_PORT).
    let master = rdma_master(&["--metrics-port", common::FREE_PORT]);
    let mport = master.free_port.expect("a metrics port").to_string();
    fill_dataset(&master, 2000, false, types_of(&master));
    let replica = rdma_replica(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 60);
    let bytes = num(&master, "rdma", "rdma_bytes");
    assert!(bytes > 0);
    let port: u16 = mport.parse().unwrap();
    let text = wait_for("the metrics to show the sync", 10, || {
        let t = common::scrape_metrics(port);
        t.contains("ferrokv_rdma_syncs_done_total 1").then_some(t)
    });
    assert!(text.contains("ferrokv_rdma_available 1"), "{text}");
    assert!(
        text.contains(&format!("ferrokv_rdma_bytes_total {bytes}")),
        "{text}"
    );
    assert!(
        text.contains("ferrokv_rdma_sync_state{state=\"done\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE ferrokv_rdma_write_latency_seconds histogram"),
        "{text}"
    );
    let count = text
        .lines()
        .find(|l| l.starts_with("ferrokv_rdma_write_latency_seconds_count"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(count >= 1.0, "{text}");
}

#[test]
fn a_provider_that_does_not_exist_reports_why_and_syncs_go_over_tcp() {
    let master = rdma_master(&[]);
    fill_dataset(&master, 500, false, types_of(&master));
    let replica = rdma_replica(&["--rdma-provider", "no-such-provider"]);
    assert_eq!(info(&replica, "rdma", "rdma_available"), "0");
    let reason = info(&replica, "rdma", "rdma_unavailable_reason");
    assert!(reason.contains("no-such-provider"), "{reason}");
    assert!(
        replica
            .log()
            .contains("RDMA sync disabled, syncs go over TCP"),
        "{}",
        replica.log()
    );
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 30);
    assert_eq!(num(&replica, "rdma", "rdma_syncs_done"), 0);
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 0);
    assert_eq!(info(&replica, "rdma", "rdma_repl_link"), "tcp");
    // Not configured at all: unavailable, and says so.
    let plain = ferrokv(&[]);
    assert_eq!(info(&plain, "rdma", "rdma_available"), "0");
    assert!(info(&plain, "rdma", "rdma_unavailable_reason").contains("not configured"));
}

#[test]
fn a_real_redis_replica_of_an_rdma_master_syncs_over_tcp() {
    let master = rdma_master(&[]);
    let t = types_of(&master);
    fill_dataset(&master, 500, false, t);
    let replica = ServerProcess::redis(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 30);
    write_load(master.port, 5, t);
    wait_converged(&master, &replica, 20);
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 0);
    assert_eq!(num(&master, "rdma", "rdma_fallbacks"), 0);
    assert_eq!(num(&master, "stats", "sync_full"), 1);
}

/// Waits until `replica`'s link to its master is up and carried by `transport`.
fn wait_link(replica: &ServerProcess, transport: &str, secs: u64) {
    wait_for("the master link to come up", secs, || {
        (info(replica, "replication", "master_link_status") == "up"
            && info(replica, "rdma", "rdma_repl_link") == transport)
            .then_some(())
    });
}

#[test]
fn the_whole_link_runs_over_rdma_and_link_kills_under_load_end_in_partial_resyncs() {
    let master = rdma_master(&["--repl-backlog-size", "64mb"]);
    let t = types_of(&master);
    fill_dataset(&master, 500, false, t);
    let replica = rdma_replica(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 30);
    // Handshake, stream and ACKs on an RDMA connection; the snapshot by
    // the one-sided push.
    wait_link(&replica, "rdma", 10);
    assert_eq!(num(&master, "rdma", "rdma_repl_replicas"), 1);
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 1);
    assert_eq!(num(&master, "clients", "connected_clients_rdma"), 1);
    let full = num(&master, "stats", "sync_full");
    let partial = num(&master, "stats", "sync_partial_ok");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        let port = master.port;
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                write_load(port, 10, t);
                rounds += 10;
            }
            rounds
        })
    };
    let kills = 6;
    for i in 0..kills {
        std::thread::sleep(Duration::from_millis(150));
        // Either side drops the link.
        let (who, kind) = if i % 2 == 0 {
            (&master, "replica")
        } else {
            (&replica, "master")
        };
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg(kind)
            .query(&mut who.client())
            .unwrap();
        assert_eq!(killed, 1, "kill {i} ({kind})");
        // The replica may not have seen a kill made on the master yet (its
        // old link still reads "up"): wait for the master to take the
        // partial resync this kill leads to, then for the link.
        wait_for("the partial resync after the kill", 20, || {
            (num(&master, "stats", "sync_partial_ok") > partial + i).then_some(())
        });
        wait_link(&replica, "rdma", 20);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = load.join().unwrap();
    assert!(rounds >= 10);
    wait_converged(&master, &replica, 30);
    assert_eq!(num(&master, "stats", "sync_full"), full, "{}", master.log());
    assert!(
        num(&master, "stats", "sync_partial_ok") >= partial + kills,
        "{}",
        master.log()
    );
    assert_eq!(num(&replica, "rdma", "rdma_fallbacks"), 0);
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 1);
    // The replica's ACKs went over its stream.
    assert!(num(&replica, "rdma", "rdma_conn_bytes_written") > 0);
}

#[test]
fn a_replica_of_a_ferrokv_master_without_rdma_keeps_its_link_on_tcp() {
    let master = ferrokv(&[]);
    fill_dataset(&master, 200, false, types_of(&master));
    let replica = rdma_replica(&[]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 30);
    wait_link(&replica, "tcp", 10);
    assert_eq!(num(&replica, "rdma", "rdma_fallbacks"), 0);
    assert_eq!(num(&master, "clients", "connected_clients_rdma"), 0);
    assert!(
        replica.log().contains("The master offers no RDMA link"),
        "{}",
        replica.log()
    );
}

#[test]
fn a_full_sync_over_an_rdma_connection_needs_capa_rdma() {
    // A client on an RDMA connection asking for a full sync without `capa
    // rdma` (there is no socket for the payload): a clear error, and the
    // connection stays usable.
    let master = rdma_master(&[]);
    let endpoint = info(&master, "rdma", "rdma_endpoint");
    let mut c = common::Raw {
        s: common::Stream::rdma(endpoint.parse().unwrap()),
    };
    c.roundtrip(
        b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n",
        b"-ERR a full sync over an RDMA connection needs REPLCONF capa rdma\r\n",
    );
    c.roundtrip(b"PING\r\n", b"+PONG\r\n");
    let mut tcp = master.client();
    let endpoint_reply: String = redis::cmd("REPLCONF")
        .arg("rdma-endpoint")
        .arg("stream")
        .query(&mut tcp)
        .unwrap();
    assert_eq!(endpoint_reply, endpoint);
}

/// The replica's installed snapshot file (renamed from its temp file).
/// The replica's one full sync went over RDMA, with no fallback to TCP
/// (both logs in the message when it did not).
fn assert_one_rdma_sync(replica: &ServerProcess, master: &ServerProcess, what: &str) {
    assert_eq!(
        num(replica, "rdma", "rdma_syncs_done"),
        1,
        "{what}\n--- replica\n{}\n--- master\n{}",
        replica.log(),
        master.log()
    );
    assert_eq!(
        num(replica, "rdma", "rdma_fallbacks"),
        0,
        "{what}\n{}",
        replica.log()
    );
}

fn snapshot_bytes(p: &ServerProcess) -> Vec<u8> {
    std::fs::read(p.dir.path().join("dump.rdb")).expect("a dump.rdb")
}

#[test]
fn a_full_sync_over_one_two_and_four_endpoints_is_byte_exact() {
    let master = rdma_master(&[]);
    fill_dataset(&master, 3000, true, types_of(&master));
    for n in [1, 2, 4] {
        // 256 KiB chunks: ~220 of them, spread over the endpoints.
        let replica = rdma_replica(&[
            "--rdma-sync-endpoints",
            &n.to_string(),
            "--rdma-chunk-size",
            "256kb",
        ]);
        replicaof(&replica, &master);
        wait_converged(&master, &replica, 60);
        assert_one_rdma_sync(&replica, &master, &format!("{n} endpoints"));
        assert_eq!(num(&replica, "rdma", "rdma_last_sync_endpoints"), n);
        assert_eq!(num(&master, "rdma", "rdma_last_sync_endpoints"), n);
        // Every byte: the file the replica installed is the master's
        // snapshot, byte for byte (its CRC64 was checked on the way too).
        let (mine, theirs) = (snapshot_bytes(&replica), snapshot_bytes(&master));
        assert_eq!(mine.len(), theirs.len(), "{n} endpoints");
        assert!(mine == theirs, "{n} endpoints: the files differ");
        assert!(
            replica
                .log()
                .contains(&format!("over RDMA ({n} endpoint(s)")),
            "{}",
            replica.log()
        );
        wait_for("the master to release every endpoint", 20, || {
            (num(&master, "rdma", "rdma_transfers_in_flight") == 0).then_some(())
        });
    }
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 3);
}

#[test]
fn one_endpoint_dying_mid_transfer_fails_the_whole_sync_and_the_retry_goes_over_tcp() {
    let master = rdma_master(&[
        "--rdma-chunk-delay-us",
        "20000",
        "--rdma-debug-drop-endpoint",
        "1",
    ]);
    fill_dataset(&master, 100, true, types_of(&master));
    let replica = rdma_replica(&["--rdma-sync-endpoints", "3"]);
    let mut c = old_data_then_sync_until_transferring(&replica, &master);
    wait_for("the sync to fail", 30, || {
        (num(&replica, "rdma", "rdma_fallbacks") >= 1).then_some(())
    });
    // Nothing half-received was installed: until the TCP retry finishes,
    // the old data serves.
    let log = replica.log();
    let failed = log.find("RDMA sync failed").expect("the failure is logged");
    assert!(!log[..failed].contains("Finished with success"), "{log}");
    // The master let go of all three endpoints, counted one failure, and
    // the retry went over TCP.
    wait_converged(&master, &replica, 60);
    assert_eq!(num(&replica, "rdma", "rdma_syncs_done"), 0);
    assert!(num(&replica, "rdma", "rdma_retries") >= 1);
    assert_eq!(num(&master, "rdma", "rdma_syncs_done"), 0);
    assert_eq!(num(&master, "rdma", "rdma_fallbacks_fabric_error"), 1);
    assert_eq!(num(&master, "rdma", "rdma_transfers_in_flight"), 0);
    assert!(master.log().contains("endpoint 1 of 3"), "{}", master.log());
    let gone: Option<String> = redis::cmd("GET").arg("old").query(&mut c).unwrap();
    assert!(gone.is_none());
}

/// What `INFO rdma` names as the tuner's next setting (N, K, C).
fn tuned_setting(p: &ServerProcess) -> (i64, i64, i64) {
    (
        num(p, "rdma", "rdma_tune_endpoints"),
        num(p, "rdma", "rdma_tune_slots"),
        num(p, "rdma", "rdma_tune_chunk"),
    )
}

/// Makes `replica` need a full sync from `master`: it leaves, diverges
/// with a write of its own, and comes back.
fn full_sync_again(replica: &ServerProcess, master: &ServerProcess) {
    let mut c = replica.client();
    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut c)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("diverged")
        .arg("1")
        .query(&mut c)
        .unwrap();
    replicaof(replica, master);
}

#[test]
fn autotune_starts_cold_keeps_what_it_learned_per_master_and_starts_warm_after_a_restart() {
    let master = rdma_master(&[]);
    fill_dataset(&master, 2000, true, types_of(&master));
    let mut replica = rdma_replica(&[
        "--rdma-autotune",
        "yes",
        "--rdma-sync-endpoints",
        "2",
        "--metrics-port",
        common::FREE_PORT,
    ]);
    assert_eq!(
        num(&replica, "rdma", "rdma_autotune"),
        0,
        "no sync chose yet"
    );
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 60);
    assert_eq!(
        num(&replica, "rdma", "rdma_syncs_done"),
        1,
        "{}",
        replica.log()
    );
    assert_eq!(num(&replica, "rdma", "rdma_autotune"), 1);
    assert_eq!(info(&replica, "rdma", "rdma_tune_start"), "cold");
    assert_eq!(
        info(&replica, "rdma", "rdma_tune_peer"),
        format!("127.0.0.1:{}", master.port)
    );
    assert_eq!(num(&replica, "rdma", "rdma_tune_windows"), 1);
    // The cold start ran the configured setting (2 endpoints, 4 slots of
    // 1 MiB) and measured it.
    assert_eq!(num(&replica, "rdma", "rdma_last_sync_endpoints"), 2);
    assert!(replica
        .log()
        .contains("RDMA autotune (cold start) for 127.0.0.1:"));
    let measured: f64 = info(&replica, "rdma", "rdma_tune_measured_mbps")
        .parse()
        .unwrap();
    assert!(measured > 0.0);
    let file = replica
        .dir
        .path()
        .join(format!("rdma-tune-127-0-0-1-{}.txt", master.port));
    assert!(
        file.exists(),
        "the tuner's state is kept in the data directory"
    );
    // The next sync's setting (a neighbour it wants to try, or the same).
    let next = tuned_setting(&replica);
    assert!(
        next.0 >= 1 && next.1 >= 2 && next.2 >= 256 * 1024,
        "{next:?}"
    );
    // /metrics shows the same setting.
    let metrics = common::scrape_metrics(replica.free_port.expect("a metrics port"));
    assert!(
        metrics.contains(&format!(
            "ferrokv_rdma_tune_setting{{param=\"endpoints\",peer=\"127.0.0.1:{}\"}} {}",
            master.port, next.0
        )),
        "{metrics}"
    );
    assert!(metrics.contains("ferrokv_rdma_autotune 1"), "{metrics}");
    replica.kill_and_restart();
    full_sync_again(&replica, &master);
    wait_converged(&master, &replica, 60);
    assert_eq!(
        num(&replica, "rdma", "rdma_syncs_done"),
        1,
        "{}",
        replica.log()
    );
    // A restarted replica starts warm, from the best setting it measured:
    // the only one so far, the configured 2 × 4 × 1 MiB.
    assert_eq!(info(&replica, "rdma", "rdma_tune_start"), "warm");
    let log = replica.log();
    assert!(
        log.contains(&format!(
            "RDMA autotune (warm start) for 127.0.0.1:{}: endpoints 2, slots 4, chunk 1048576",
            master.port
        )),
        "{log}"
    );
    assert_eq!(num(&replica, "rdma", "rdma_last_sync_endpoints"), 2);
    // And learns on from there: the file keeps both syncs' outcomes.
    assert_eq!(num(&replica, "rdma", "rdma_tune_windows"), 1);
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(saved.starts_with("ferrokv-tune "), "{saved}");
}

#[test]
fn a_master_with_autotune_tunes_writes_in_flight_within_a_transfer() {
    let master = rdma_master(&["--rdma-autotune", "yes"]);
    fill_dataset(&master, 3000, true, types_of(&master));
    // ~850 chunks of 64 KiB over two endpoints of 8 slots: ~26 windows.
    let replica = rdma_replica(&[
        "--rdma-chunk-size",
        "64kb",
        "--rdma-ring-slots",
        "8",
        "--rdma-sync-endpoints",
        "2",
    ]);
    replicaof(&replica, &master);
    wait_converged(&master, &replica, 60);
    assert_one_rdma_sync(&replica, &master, "writes in flight tuned");
    let windows = num(&master, "rdma", "rdma_tune_transfer_windows");
    assert!(windows >= 20, "{windows} windows");
    // The tuner moved W within 1..=K and the data arrived whole (the
    // digests above; the CRC64 on the way).
    let w = num(&master, "rdma", "rdma_tune_writes_in_flight");
    assert!((1..=8).contains(&w), "writes in flight {w}");
    let (mine, theirs) = (snapshot_bytes(&replica), snapshot_bytes(&master));
    assert!(mine == theirs, "the files differ");
}
