//! Guards against a benchmark whose numbers come from wrong traffic: the
//! real `ferrokv-bench` binary drives the real `redis-server` (hash and
//! string models) and, when built, the real `ferrokv-server`; the data it
//! leaves behind is read back and every output file is checked.

mod common;

use common::{bench, ServerProcess};
use ferrokv_bench::client::Connection;
use ferrokv_bench::workload::RecordLayout;
use ferrokv_resp::Frame;
use std::path::Path;

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The row of `op` in `phase` of a results document.
fn row<'a>(
    doc: &'a serde_json::Value,
    server: &str,
    phase: &str,
    op: &str,
) -> &'a serde_json::Value {
    doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == phase && p["server"] == server)
        .unwrap_or_else(|| panic!("no {server} {phase} phase in {doc}"))["ops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["op"] == op)
        .unwrap_or_else(|| panic!("no {op} row"))
}

fn assert_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    // IHDR: width and height, big-endian, at offsets 16 and 20.
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
    assert_eq!((w, h), (1000, 600));
    assert!(bytes.len() > 10_000, "{} is nearly empty", path.display());
}

fn hash_of(reply: Frame) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Frame::Array(items) = reply else {
        panic!("HGETALL reply {reply:?}")
    };
    let mut pairs: Vec<_> = items
        .chunks(2)
        .map(|p| {
            (
                p[0].as_bytes().unwrap().to_vec(),
                p[1].as_bytes().unwrap().to_vec(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn hash_model_against_redis_writes_every_output_and_the_loaded_records() {
    let redis = ServerProcess::redis();
    let out = tempfile::tempdir().unwrap();
    let addr = redis.addr();
    let o = out.path().to_str().unwrap();
    let stdout = bench(&format!(
        "run -s {addr} --workload a --data-model hash --records 500 \
         --operations 2000 --value-size 1024 --fields 10 -c 2 -P 4 --verify \
         --interval-ms 100 --no-progress --out {o}"
    ))
    .stdout;
    let table = String::from_utf8(stdout).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("server") && lines[0].contains("p99.9 µs"),
        "{table}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" load ") && l.contains("INSERT")),
        "{table}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" run ") && l.contains("READ")),
        "{table}"
    );

    // JSON: counts add up, nothing failed, percentiles ordered.
    let doc = json(&out.path().join("results.json"));
    assert_eq!(doc["config"]["data_model"], "hash");
    assert_eq!(row(&doc, &addr, "load", "INSERT")["count"], 500);
    let total = row(&doc, &addr, "run", "TOTAL");
    assert_eq!(total["count"], 2000);
    let reads = row(&doc, &addr, "run", "READ")["count"].as_u64().unwrap();
    let updates = row(&doc, &addr, "run", "UPDATE")["count"].as_u64().unwrap();
    assert_eq!(reads + updates, 2000);
    assert!(
        (800..1200).contains(&reads),
        "workload A is 50/50: {reads} reads"
    );
    for field in ["errors", "not_found", "mismatches"] {
        assert_eq!(total[field], 0, "{field}");
    }
    let p = |k: &str| total[k].as_u64().unwrap();
    assert!(p("p50_us") <= p("p90_us") && p("p90_us") <= p("p99_us"));
    assert!(p("p99_us") <= p("p999_us") && p("p999_us") <= p("max_us"));

    // CSV and timeline.
    let csv = std::fs::read_to_string(out.path().join("results.csv")).unwrap();
    assert!(csv.starts_with("server,phase,value_size,op,count,"));
    assert_eq!(csv.lines().count(), 1 + 1 + 3, "{csv}");
    let timeline = std::fs::read_to_string(out.path().join("timeline.csv")).unwrap();
    assert!(timeline.lines().count() > 2, "{timeline}");
    assert_png(&out.path().join("throughput.png"));
    assert_png(&out.path().join("latency_cdf.png"));

    // The records are in the server as YCSB lays them out.
    let layout = RecordLayout::new("user", 1024, 10);
    let mut conn = Connection::connect(&addr).unwrap();
    assert_eq!(conn.call(&["DBSIZE"]).unwrap(), Frame::Integer(501));
    assert_eq!(
        conn.call(&["ZCARD", "ycsb:index"]).unwrap(),
        Frame::Integer(500)
    );
    for keynum in [0u64, 1, 499] {
        let got = hash_of(conn.call(&["HGETALL", &layout.key(keynum)]).unwrap());
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = (0..10)
            .map(|f| {
                let mut v = Vec::new();
                layout.field_value(keynum, f, &mut v);
                (format!("field{f}").into_bytes(), v)
            })
            .collect();
        want.sort();
        assert_eq!(got, want, "record {keynum}");
    }
}

#[test]
fn scans_read_modify_writes_and_open_loop_against_redis_verify_clean() {
    let redis = ServerProcess::redis();
    let addr = redis.addr();
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    // Workload E: scans over the sorted-set index, 5% inserts.
    bench(&format!(
        "run -s {addr} -w e --data-model hash --records 300 --operations 400 \
         --max-scan-length 20 --value-size 200 --verify --no-progress \
         --no-plots --out {o}"
    ));
    let doc = json(&out.path().join("results.json"));
    let scans = row(&doc, &addr, "run", "SCAN");
    assert!(scans["count"].as_u64().unwrap() > 300);
    assert_eq!(row(&doc, &addr, "run", "TOTAL")["errors"], 0);
    assert_eq!(row(&doc, &addr, "run", "TOTAL")["mismatches"], 0);
    let inserts = row(&doc, &addr, "run", "INSERT")["count"].as_u64().unwrap();
    let mut conn = Connection::connect(&addr).unwrap();
    assert_eq!(
        conn.call(&["ZCARD", "ycsb:index"]).unwrap(),
        Frame::Integer(300 + inserts as i64)
    );

    // Workload F at a target rate: 600 operations at 1500/s take ~0.4 s.
    bench(&format!(
        "run -s {addr} -w f --data-model hash --phase run --records 300 \
         --operations 600 --value-size 200 --target-rate 1500 --verify \
         --no-progress --no-plots --out {o}"
    ));
    let doc = json(&out.path().join("results.json"));
    let run = doc["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["phase"] == "run")
        .unwrap();
    let elapsed = run["elapsed_sec"].as_f64().unwrap();
    assert!(
        elapsed > 0.35,
        "open loop ran ahead of its schedule: {elapsed} s"
    );
    let rmw = row(&doc, &addr, "run", "READ-MODIFY-WRITE");
    assert!(rmw["count"].as_u64().unwrap() > 200);
    assert_eq!(rmw["not_found"], 0);
    assert_eq!(row(&doc, &addr, "run", "TOTAL")["mismatches"], 0);
}

#[test]
fn string_model_works_against_redis_and_ferrokv() {
    let mut servers = vec![("redis", ServerProcess::redis())];
    match ServerProcess::ferrokv() {
        Some(f) => servers.push(("ferrokv", f)),
        None => eprintln!("ferrokv-server not built: string model checked against redis only"),
    }
    let layout = RecordLayout::new("user", 4096, 10);
    for (name, server) in &servers {
        let addr = server.addr();
        let out = tempfile::tempdir().unwrap();
        // Both servers have hashes (which `auto` would pick): the string
        // model is asked for.
        let o = out.path().to_str().unwrap();
        bench(&format!(
            "run -s {addr} -w b --data-model string --records 300 --operations \
             1000 --value-size 4096 -P 8 --verify --no-progress --out {o}"
        ));
        let doc = json(&out.path().join("results.json"));
        assert_eq!(doc["config"]["data_model"], "string", "{name}");
        assert_eq!(row(&doc, &addr, "run", "TOTAL")["count"], 1000, "{name}");
        assert_eq!(row(&doc, &addr, "run", "TOTAL")["mismatches"], 0, "{name}");
        assert_eq!(row(&doc, &addr, "run", "TOTAL")["errors"], 0, "{name}");
        assert_png(&out.path().join("latency_cdf.png"));
        let mut conn = Connection::connect(&addr).unwrap();
        let got = conn.call(&["GET", &layout.key(42)]).unwrap();
        assert_eq!(got, Frame::Bulk(layout.string_value(42)), "{name}");
        assert_eq!(
            conn.call(&["DBSIZE"]).unwrap(),
            Frame::Integer(300),
            "{name}"
        );
    }
}

#[test]
fn unix_transport_runs_a_workload_over_the_socket() {
    let mut servers = vec![("redis", ServerProcess::with_unix_socket(false).unwrap())];
    match ServerProcess::with_unix_socket(true) {
        Some(f) => servers.push(("ferrokv", f)),
        None => eprintln!("ferrokv-server not built: unix transport checked against redis only"),
    }
    for (name, server) in &servers {
        let sock = server.unix_socket().unwrap();
        let path = sock.to_str().unwrap();
        let out = tempfile::tempdir().unwrap();
        let o = out.path().to_str().unwrap();
        bench(&format!(
            "run --transport unix -s {path} -w a --data-model string --records 200 \
             --operations 1000 -P 4 --verify --no-progress --out {o}"
        ));
        let doc = json(&out.path().join("results.json"));
        let addr = format!("unix:{path}");
        assert_eq!(row(&doc, &addr, "run", "TOTAL")["count"], 1000, "{name}");
        assert_eq!(row(&doc, &addr, "run", "TOTAL")["mismatches"], 0, "{name}");
        // The records went in over the socket: a TCP client sees them.
        let mut conn = Connection::connect(&server.addr()).unwrap();
        assert_eq!(
            conn.call(&["DBSIZE"]).unwrap(),
            Frame::Integer(200),
            "{name}"
        );
        // And the connections were Unix ones (redis shows them as `U`).
        let mut conn = Connection::connect(&addr).unwrap();
        let Frame::Bulk(info) = conn.call(&["CLIENT", "INFO"]).unwrap() else {
            panic!("CLIENT INFO")
        };
        let info = String::from_utf8(info).unwrap();
        assert!(info.contains("flags=U"), "{name}: {info}");
    }
}

#[test]
fn rdma_transport_runs_a_workload_over_rdma_connections() {
    let Some(server) = ServerProcess::ferrokv_with_rdma() else {
        eprintln!("ferrokv-server not built: skipped");
        return;
    };
    let ep = server.rdma_endpoint();
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    bench(&format!(
        "run --transport rdma -s {ep} -w a --data-model string --records 200 \
         --operations 1000 -P 4 -c 2 --verify --no-progress --out {o}"
    ));
    let doc = json(&out.path().join("results.json"));
    let addr = format!("rdma:{ep}");
    assert_eq!(row(&doc, &addr, "run", "TOTAL")["count"], 1000);
    assert_eq!(row(&doc, &addr, "run", "TOTAL")["mismatches"], 0);
    // The records went in over RDMA: a TCP client sees them, and the
    // server counted the RDMA connections.
    let mut conn = Connection::connect(&server.addr()).unwrap();
    assert_eq!(conn.call(&["DBSIZE"]).unwrap(), Frame::Integer(200));
    let Frame::Bulk(info) = conn.call(&["INFO", "rdma"]).unwrap() else {
        panic!("INFO")
    };
    let info = String::from_utf8(info).unwrap();
    let accepted: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("rdma_connections_accepted:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(accepted >= 2, "{info}");
}

#[test]
fn compare_mode_runs_every_server_and_prints_ratios() {
    let a = ServerProcess::redis();
    let b = ServerProcess::ferrokv().unwrap_or_else(ServerProcess::redis);
    let out = tempfile::tempdir().unwrap();
    let sa = format!("first={}", a.addr());
    let sb = format!("second={}", b.addr());
    let o = out.path().to_str().unwrap();
    let stdout = bench(&format!(
        "compare -s {sa} -s {sb} --rounds 2 -w c --records 200 --operations 500 \
         --value-sizes 1024,4096 --verify --no-progress --out {o}"
    ))
    .stdout;
    let text = String::from_utf8(stdout).unwrap();
    assert!(text.contains("ops/s ×"), "{text}");
    for size in ["1024", "4096"] {
        let ratio_line = text
            .lines()
            .find(|l| {
                l.trim_start().starts_with(size)
                    && l.contains(" READ ")
                    && l.contains("second / first")
            })
            .unwrap_or_else(|| panic!("no {size} B READ ratio row in\n{text}"));
        // bytes, op, "second", "/", "first", ops/s ratio, ...
        let ratio: f64 = ratio_line
            .split_whitespace()
            .nth(5)
            .unwrap()
            .parse()
            .unwrap();
        assert!(ratio > 0.0, "{ratio_line}");
    }
    let doc = json(&out.path().join("results.json"));
    let phases = doc["phases"].as_array().unwrap();
    assert_eq!(
        phases.len(),
        2 * 2 * 2,
        "load and run, two servers, two sizes"
    );
    for p in phases.iter().filter(|p| p["phase"] == "run") {
        let read = &p["ops"][0];
        assert_eq!(read["op"], "READ");
        // Two rounds of 500 reads.
        assert_eq!(read["count"], 1000, "{p}");
        assert_eq!(read["mismatches"], 0);
        assert_eq!(read["not_found"], 0);
    }
    let cmp = doc["comparison"].as_array().unwrap();
    for size in [1024, 4096] {
        assert!(cmp
            .iter()
            .any(|r| r["op"] == "READ" && r["baseline"] == "first" && r["value_size"] == size));
    }
    assert_png(&out.path().join("throughput.png"));
}

#[test]
fn open_loop_latency_includes_a_server_stall() {
    // Coordinated omission: a closed-loop client stops sending while the
    // server stalls and so never measures the stall. The open loop keeps
    // its schedule; every operation due during the pause waits for it.
    let redis = ServerProcess::redis();
    let addr = redis.addr();
    let out = tempfile::tempdir().unwrap();
    let o = out.path().to_str().unwrap();
    bench(&format!(
        "run -s {addr} --phase load --records 200 --value-size 100 --no-progress --no-plots --out {o}"
    ));
    let pauser = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            let mut conn = Connection::connect(&addr).unwrap();
            let reply = conn.call(&["CLIENT", "PAUSE", "300", "ALL"]).unwrap();
            assert_eq!(reply, Frame::Simple(b"OK".to_vec()));
        })
    };
    bench(&format!(
        "run -s {addr} --phase run -w c --records 200 --value-size 100 --operations 1500 \
         --target-rate 1000 -c 2 --no-progress --no-plots --out {o}"
    ));
    pauser.join().unwrap();
    let doc = json(&out.path().join("results.json"));
    let read = row(&doc, &addr, "run", "READ");
    assert_eq!(read["count"], 1500);
    // ~300 of 1500 operations fall in the pause.
    let p90 = read["p90_us"].as_u64().unwrap();
    let max = read["max_us"].as_u64().unwrap();
    assert!(p90 >= 20_000, "p90 {p90} µs hides the 300 ms stall");
    assert!(max >= 250_000, "max {max} µs hides the 300 ms stall");
}
