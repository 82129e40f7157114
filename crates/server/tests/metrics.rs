//! Guards the Prometheus `/metrics` endpoint: the series a scrape returns
//! hold exactly what the server did (counts of commands sent, keys stored,
//! errors replied, saves made), the text passes `promtool check metrics`,
//! and anything but `GET /metrics` is a 404.
mod common;
use common::{wait_for, ServerProcess};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A server with the endpoint on a free port (retried if another process
/// took the port between our probe and the server's bind).
fn server_with_metrics(extra: &[&str]) -> (ServerProcess, u16) {
    let mut args = vec!["--metrics-port", common::FREE_PORT];
    args.extend_from_slice(extra);
    let p = ServerProcess::ferrokv(&args);
    let port = p.free_port.expect("a metrics port");
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_ok(),
        "{}",
        p.log()
    );
    (p, port)
}

/// One HTTP/1.1 request; returns the status line, headers and body.
fn http(port: u16, request: &str) -> (String, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut resp = Vec::new();
    s.read_to_end(&mut resp).unwrap();
    let resp = String::from_utf8(resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").expect("a header block");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_string(), body.to_string())
}

fn scrape(port: u16) -> String {
    let (status, headers, body) = http(
        port,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
        "{headers}"
    );
    assert!(headers.contains(&format!("Content-Length: {}", body.len())));
    body
}

/// The value of the sample line `series` (name with its labels), if any.
fn value(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(str::to_string)
}

/// Scrapes until the snapshot (published every cron tick) shows `series`
/// at `want`, then returns that scrape.
fn scrape_until(port: u16, series: &str, want: &str) -> String {
    wait_for(&format!("{series} = {want}"), 10, || {
        let text = scrape(port);
        (value(&text, series).as_deref() == Some(want)).then_some(text)
    })
}

#[test]
fn metrics_series_equal_what_the_commands_did() {
    let (srv, port) = server_with_metrics(&[]);
    let mut c = srv.raw();
    // The harness's own start-up probe (a connection and an INFO) counts
    // too: start from what INFO says now.
    let info = match c.cmd(&["INFO", "stats"]) {
        ferrokv_resp::Frame::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap()
            .parse()
            .unwrap()
    };
    let connections = field("total_connections_received").to_string();
    let processed_before = field("total_commands_processed");
    for i in 0..5 {
        c.cmd(&["SET", &format!("k{i}"), "v"]);
    }
    c.cmd(&["SET", "ttl", "v", "EX", "100"]);
    c.cmd(&["GET", "k0"]);
    c.cmd(&["GET", "k1"]);
    c.cmd(&["GET", "missing"]);
    c.cmd(&["NOSUCHCOMMAND"]);
    c.cmd(&["INCR", "k0"]); // "v" is not an integer: ERR
    let t = scrape_until(port, "ferrokv_commands_total{cmd=\"set\"}", "6");
    let expect = [
        ("ferrokv_commands_total{cmd=\"get\"}", "3"),
        ("ferrokv_commands_total{cmd=\"incr\"}", "1"),
        ("ferrokv_commands_failed_calls_total{cmd=\"incr\"}", "1"),
        ("ferrokv_commands_rejected_calls_total{cmd=\"set\"}", "0"),
        ("ferrokv_command_latency_seconds_count{cmd=\"set\"}", "6"),
        (
            "ferrokv_command_latency_seconds_bucket{cmd=\"set\",le=\"+Inf\"}",
            "6",
        ),
        ("ferrokv_keyspace_hits_total", "2"),
        ("ferrokv_keyspace_misses_total", "1"),
        ("ferrokv_db_keys{db=\"db0\"}", "6"),
        ("ferrokv_db_keys_expiring{db=\"db0\"}", "1"),
        ("ferrokv_errors_total{err=\"ERR\"}", "2"),
        ("ferrokv_error_replies_total", "2"),
        ("ferrokv_connected_clients", "1"),
        ("ferrokv_connections_received_total", connections.as_str()),
        ("ferrokv_rejected_connections_total", "0"),
        ("ferrokv_aof_enabled", "0"),
        ("ferrokv_rdb_changes_since_last_save", "6"),
        ("ferrokv_rdb_saves_total", "0"),
        ("ferrokv_rdb_last_bgsave_status", "1"),
        ("ferrokv_rdb_bgsave_in_progress", "0"),
    ];
    for (series, want) in expect {
        assert_eq!(value(&t, series).as_deref(), Some(want), "{series}\n{t}");
    }
    // INFO, 6 SETs, 3 GETs, INCR; the unknown command is not processed.
    assert_eq!(
        value(&t, "ferrokv_commands_processed_total"),
        Some((processed_before + 11).to_string())
    );
    let bytes_in: u64 = value(&t, "ferrokv_net_input_bytes_total")
        .unwrap()
        .parse()
        .unwrap();
    assert!(bytes_in > 100, "{bytes_in}");
    let used: u64 = value(&t, "ferrokv_memory_used_bytes")
        .unwrap()
        .parse()
        .unwrap();
    assert!(used > 0);
    // A command never called has no series.
    assert_eq!(value(&t, "ferrokv_commands_total{cmd=\"mset\"}"), None);
    assert!(t.contains("# TYPE ferrokv_command_latency_seconds histogram\n"));
}

#[test]
fn persistence_series_follow_saves_and_the_aof() {
    let (srv, port) = server_with_metrics(&["--appendonly", "yes"]);
    let mut c = srv.raw();
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["SAVE"]);
    let t = scrape_until(port, "ferrokv_rdb_saves_total", "1");
    for (series, want) in [
        ("ferrokv_aof_enabled", "1"),
        ("ferrokv_aof_last_write_status", "1"),
        ("ferrokv_aof_rewrite_in_progress", "0"),
        ("ferrokv_rdb_changes_since_last_save", "0"),
        ("ferrokv_rdb_last_bgsave_duration_seconds", "-1"),
    ] {
        assert_eq!(value(&t, series).as_deref(), Some(want), "{series}\n{t}");
    }
    let aof_size: u64 = value(&t, "ferrokv_aof_current_size_bytes")
        .unwrap()
        .parse()
        .unwrap();
    assert!(aof_size > 0, "the SET is in the AOF");
    let saved: u64 = value(&t, "ferrokv_rdb_last_save_timestamp_seconds")
        .unwrap()
        .parse()
        .unwrap();
    assert!(saved > 1_600_000_000);
}

#[test]
fn scraped_text_passes_promtool_check_metrics() {
    // scripts/test.sh and .ci/run install it: a missing promtool is a
    // broken set-up, not a reason to pass.
    assert!(
        std::process::Command::new("promtool")
            .arg("--version")
            .output()
            .is_ok(),
        "promtool is not installed (Debian package prometheus; scripts/test.sh installs it)"
    );
    let (srv, port) = server_with_metrics(&[]);
    let mut c = srv.raw();
    c.cmd(&["SET", "a", "1"]);
    c.cmd(&["GET", "a"]);
    c.cmd(&["NOSUCH"]);
    let text = scrape_until(port, "ferrokv_commands_total{cmd=\"get\"}", "1");
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn anything_but_get_metrics_is_not_found() {
    let (_srv, port) = server_with_metrics(&[]);
    let (status, _, _) = http(port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _, _) = http(port, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    // The endpoint keeps serving after those.
    assert!(scrape(port).contains("ferrokv_uptime_in_seconds "));
}

#[test]
fn no_endpoint_without_metrics_port() {
    let srv = ServerProcess::ferrokv(&[]);
    let mut c = srv.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "metrics-port"]),
        ferrokv_resp::Frame::Array(vec![
            ferrokv_resp::Frame::Bulk(b"metrics-port".to_vec()),
            ferrokv_resp::Frame::Bulk(b"0".to_vec()),
        ])
    );
}

/// Every metric name a PromQL expression of the dashboard uses, histogram
/// suffixes mapped to their family.
fn dashboard_metric_names() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../dashboards/ferrokv.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            exprs.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        exprs.push(v["query"].as_str().unwrap().to_string());
    }
    assert!(exprs.len() > 20, "the dashboard lost its panels");
    let mut names = Vec::new();
    for e in &exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("ferrokv_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            let mut name = tail[..end].to_string();
            for suffix in ["_bucket", "_sum", "_count"] {
                if let Some(base) = name.strip_suffix(suffix) {
                    name = base.to_string();
                }
            }
            if !names.contains(&name) {
                names.push(name);
            }
            rest = &tail[end..];
        }
    }
    names
}

#[test]
fn every_dashboard_query_names_an_exported_series() {
    let names = dashboard_metric_names();
    let (srv, port) = server_with_metrics(&["--slowlog-log-slower-than", "0"]);
    let mut c = srv.raw();
    // Per-command, per-db and error series exist once something happened.
    c.cmd(&["SET", "k", "v"]);
    c.cmd(&["EXPIRE", "k", "100"]);
    c.cmd(&["GET", "k"]);
    c.cmd(&["NOSUCH"]);
    let text = scrape_until(port, "ferrokv_db_keys_expiring{db=\"db0\"}", "1");
    for name in &names {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "the dashboard queries {name}, which the endpoint does not export"
        );
    }
}

/// A real Prometheus (Debian's) scrapes the endpoint and can query it.
#[test]
fn a_real_prometheus_scrapes_the_endpoint() {
    let (srv, port) = server_with_metrics(&[]);
    let mut c = srv.raw();
    for i in 0..5 {
        c.cmd(&["SET", &format!("p{i}"), "v"]);
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: ferrokv\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    )
    .unwrap();
    let web = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut prom = std::process::Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{web}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus installed (Debian package prometheus)");
    let query = |q: &str| -> Option<String> {
        let mut s = TcpStream::connect(("127.0.0.1", web)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            s,
            "GET /api/v1/query?query={q} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut resp = String::new();
        s.read_to_string(&mut resp).ok()?;
        Some(resp)
    };
    let found = wait_for("prometheus to scrape ferrokv", 60, || {
        let up = query("up")?;
        let sets = query("ferrokv_commands_total")?;
        (up.contains("\"job\":\"ferrokv\"")
            && up.contains("\"1\"]")
            && sets.contains("\"cmd\":\"set\""))
        .then_some(sets)
    });
    let _ = prom.kill();
    let _ = prom.wait();
    assert!(found.contains("\"5\"]"), "{found}");
}

/// The client-side caching series follow what the tracking clients did:
/// the table's size, the messages sent, the keys forgotten for
/// `tracking-table-max-keys`.
#[test]
fn tracking_series_follow_the_tracking_table() {
    let (srv, port) = server_with_metrics(&["--tracking-table-max-keys", "3"]);
    let mut a = srv.raw();
    let mut w = srv.raw();
    assert!(matches!(
        a.cmd(&["HELLO", "3"]),
        ferrokv_resp::Frame::Map(_)
    ));
    a.cmd(&["CLIENT", "TRACKING", "on"]);
    a.cmd(&["MGET", "a", "b"]);
    let t = scrape_until(port, "ferrokv_tracking_total_keys", "2");
    assert_eq!(value(&t, "ferrokv_tracking_clients").as_deref(), Some("1"));
    assert_eq!(
        value(&t, "ferrokv_tracking_total_items").as_deref(),
        Some("2")
    );
    assert_eq!(
        value(&t, "ferrokv_tracking_invalidations_total").as_deref(),
        Some("0")
    );
    w.cmd(&["SET", "a", "1"]);
    scrape_until(port, "ferrokv_tracking_invalidations_total", "1");
    // Five keys over a bound of three: the next command forgets two.
    a.cmd(&["MGET", "c", "d", "e", "f"]);
    w.cmd(&["PING"]);
    let t = scrape_until(port, "ferrokv_tracking_keys_forgotten_total", "2");
    assert_eq!(
        value(&t, "ferrokv_tracking_total_keys").as_deref(),
        Some("3")
    );
    assert_eq!(
        value(&t, "ferrokv_tracking_invalidations_total").as_deref(),
        Some("3")
    );
    assert_eq!(
        value(&t, "ferrokv_tracking_total_prefixes").as_deref(),
        Some("0")
    );
}

#[test]
fn loading_series_are_1_during_a_startup_load_then_0() {
    let (mut p, port) = server_with_metrics(&["--key-load-delay", "100"]);
    let mut c = p.client();
    let mut pipe = redis::pipe();
    for i in 0..20_000 {
        pipe.cmd("SET").arg(format!("key:{i}")).arg(i).ignore();
    }
    pipe.query::<()>(&mut c).unwrap();
    let _: () = redis::cmd("SAVE").query(&mut c).unwrap();
    drop(c);
    let rdb_len = std::fs::metadata(p.dir.path().join("dump.rdb"))
        .unwrap()
        .len();
    p.kill_and_restart_no_wait();
    let text = scrape_until(port, "ferrokv_loading", "1");
    assert_eq!(
        value(&text, "ferrokv_loading_total_bytes"),
        Some(rdb_len.to_string())
    );
    let text = scrape_until(port, "ferrokv_loading", "0");
    assert_eq!(
        value(&text, "ferrokv_loading_loaded_bytes").as_deref(),
        Some("0")
    );
}
