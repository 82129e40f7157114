//! RDMA client connections (`rdma-bind`, libfabric's tcp provider): what the command suites
//! cannot show when they run over RDMA (`FERROKV_TESTS_TRANSPORT=rdma`): a value far larger
//! than the rings, thousands of commands in one write, a reader that stops reading, a client
//! that dies mid-stream, many connections opened and closed, and the counters of all that in
//! `INFO`. ferrokv only (redis-server has no RDMA).

mod common;

use common::{wait_for, Raw, ServerProcess, Stream};
use ferrokv_resp::Frame;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn server(extra: &[&str]) -> (ServerProcess, std::net::SocketAddr) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut args = vec!["--rdma-bind", "127.0.0.1", "--rdma-port", &port];
    args.extend_from_slice(extra);
    let s = ServerProcess::ferrokv(&args);
    let ep = format!("127.0.0.1:{port}").parse().unwrap();
    (s, ep)
}

fn tcp(s: &ServerProcess) -> Raw {
    let t = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    t.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    Raw { s: Stream::Tcp(t) }
}

fn info(s: &ServerProcess, field: &str) -> i64 {
    info_text(s, field)
        .unwrap_or_else(|| panic!("no {field} in INFO"))
        .parse()
        .unwrap()
}

/// A field of `INFO rdma` (`rdma_*`) or `INFO clients`, as text.
fn info_text(s: &ServerProcess, field: &str) -> Option<String> {
    let section = if field.starts_with("rdma_") {
        "rdma"
    } else {
        "clients"
    };
    let text = tcp(s).cmd(&["INFO", section]);
    let text = String::from_utf8_lossy(text.as_bytes().unwrap()).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
}

#[test]
fn a_hundred_megabyte_value_and_ten_thousand_pipelined_commands() {
    let Some(_) = ferrokv_fabric::Library::open_default().ok() else {
        panic!("libfabric is needed (apt-get install libfabric1)");
    };
    let (s, ep) = server(&[]);
    let mut r = Raw {
        s: Stream::rdma(ep),
    };
    // 100 MB: ~1600 slots of 64 KiB each way, the rings 1 MiB.
    let big = vec![b'v'; 100 << 20];
    assert_eq!(
        r.cmd(&[b"SET".as_slice(), b"big", &big]),
        Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(r.cmd(&[b"GET".as_slice(), b"big"]), Frame::Bulk(big));
    assert_eq!(r.cmd(&["STRLEN", "big"]), Frame::Integer(100 << 20));
    // 10,000 commands in one write (their slots cut commands in two); their
    // replies read after. The commands are parsed where they landed in the
    // ring, but for the pieces a slot's end cut off.
    let in_place = info(&s, "rdma_conn_bytes_parsed_in_place");
    let mut batch = Vec::new();
    for i in 0..10_000 {
        batch.extend_from_slice(&Frame::command(&["INCR", &format!("n{}", i % 7)]));
    }
    r.send(&batch);
    let replies = r.read_frames(10_000);
    let mut expect = [0i64; 7];
    for (i, f) in replies.iter().enumerate() {
        expect[i % 7] += 1;
        assert_eq!(*f, Frame::Integer(expect[i % 7]), "reply {i}");
    }
    assert_eq!(tcp(&s).cmd(&["GET", "n0"]), Frame::Bulk(b"1429".to_vec()));
    let parsed = info(&s, "rdma_conn_bytes_parsed_in_place") - in_place;
    assert!(
        parsed > batch.len() as i64 / 2 && parsed <= batch.len() as i64,
        "{parsed} of {} bytes parsed in place",
        batch.len()
    );
    // The counters saw it.
    assert_eq!(info(&s, "connected_clients_rdma"), 1);
    assert_eq!(info(&s, "rdma_connections"), 1);
    assert!(info(&s, "rdma_conn_bytes_read") > 100 << 20);
    assert!(info(&s, "rdma_conn_bytes_written") > 100 << 20);
    assert!(info(&s, "rdma_conn_writes") > 1600);
    // rdma_write_latency, extended to connections: every write credited.
    assert!(info(&s, "rdma_conn_write_latency_count") > 1600);
    // The connection's own counters in its CLIENT LIST line.
    let Frame::Bulk(line) = r.cmd(&["CLIENT", "INFO"]) else {
        panic!("CLIENT INFO")
    };
    let line = String::from_utf8_lossy(&line).into_owned();
    let field = |name: &str| -> i64 {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {line}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert!(field("rdma-bytes-written") > 100 << 20, "{line}");
    assert!(field("rdma-bytes-read") > 100 << 20, "{line}");
    assert!(field("rdma-writes") > 1600, "{line}");
    // One RDMA connection: its own counters are the totals.
    assert_eq!(
        field("rdma-qp-retries"),
        info(&s, "rdma_conn_qp_retry_count")
    );
    assert_eq!(
        field("rdma-credit-stalls"),
        info(&s, "rdma_conn_credit_stalls")
    );
    // Its write latency is the totals' mean (give or take the writes of the
    // replies in between), and was measured at all.
    let lat = field("rdma-write-latency-usec") as f64;
    let text = tcp(&s).cmd(&["INFO", "rdma"]);
    let text = String::from_utf8_lossy(text.as_bytes().unwrap()).into_owned();
    let mean: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("rdma_conn_write_latency_mean_usec:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        lat >= 1.0 && (lat - mean).abs() <= mean * 0.1 + 1.0,
        "{lat} vs {mean}"
    );
    // Selective completions (rdma-conn-signal-every 4): about one ring write
    // in four asked for a local completion, and the 100 MB went through.
    let (writes, signalled) = (
        info(&s, "rdma_conn_writes") - info(&s, "rdma_conn_injected_writes"),
        info(&s, "rdma_conn_signalled_writes"),
    );
    assert!(
        signalled >= writes / 4 && signalled <= writes / 2,
        "{signalled} of {writes}"
    );
    // CLIENT LIST names the peer by its address, as for TCP.
    let own = r.s.local_addr().unwrap();
    let list = r.cmd(&["CLIENT", "LIST"]);
    let list = String::from_utf8_lossy(list.as_bytes().unwrap()).into_owned();
    assert!(list.contains(&format!("addr={own} ")), "{list}");
}

#[test]
fn a_reader_that_stops_is_held_back_and_others_are_served() {
    let (s, ep) = server(&["--client-output-buffer-limit", "normal 0 0 0"]);
    let mut tcp_c = tcp(&s);
    let big = vec![b'x'; 512 << 10];
    assert_eq!(
        tcp_c.cmd(&[b"SET".as_slice(), b"k", &big]),
        Frame::Simple(b"OK".to_vec())
    );
    // 2000 GETs of 1 MiB, never read: the rings fill, replies wait in the
    // output buffer until backpressure stops reading the client's commands.
    let mut lazy = Raw {
        s: Stream::rdma(ep),
    };
    let mut batch = Vec::new();
    for _ in 0..400 {
        batch.extend_from_slice(&Frame::command(&["GET", "k"]));
    }
    lazy.send(&batch);
    std::thread::sleep(Duration::from_millis(500));
    // Others are answered at once, and the server's memory stays bounded.
    let t0 = Instant::now();
    assert_eq!(tcp_c.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    assert!(t0.elapsed() < Duration::from_secs(2));
    let mut other = Raw {
        s: Stream::rdma(ep),
    };
    assert_eq!(other.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    let used = info_memory(&s);
    assert!(used < 100 << 20, "used_memory {used}");
    assert!(info(&s, "rdma_conn_credit_stalls") > 0);
    // Reading resumes it: every reply arrives, byte for byte, and no more.
    lazy.s
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let one = (512 << 10) + 11;
    let header = b"$524288\r\n";
    let mut at = 0usize;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match lazy.s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &c in &chunk[..n] {
            let r = at % one;
            let want = if r < header.len() {
                header[r]
            } else if r < header.len() + (512 << 10) {
                b'x'
            } else {
                b"\r\n"[r - header.len() - (512 << 10)]
            };
            assert_eq!(c, want, "byte {at}");
            at += 1;
        }
    }
    assert_eq!(at, 400 * one);
}

fn info_memory(s: &ServerProcess) -> i64 {
    let text = tcp(s).cmd(&["INFO", "memory"]);
    let text = String::from_utf8_lossy(text.as_bytes().unwrap()).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn clients_that_die_mid_stream_or_come_and_go_leave_nothing_behind() {
    let (s, ep) = server(&[]);
    // Half a command, then the client is gone.
    {
        let mut r = Raw {
            s: Stream::rdma(ep),
        };
        r.s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc")
            .unwrap();
        assert_eq!(info(&s, "connected_clients_rdma"), 1);
    }
    wait_for("the dead client to be closed", 10, || {
        (info(&s, "connected_clients_rdma") == 0).then_some(())
    });
    // 200 connections opened, used and closed.
    for i in 0..200 {
        let mut r = Raw {
            s: Stream::rdma(ep),
        };
        assert_eq!(
            r.cmd(&["SET", &format!("c{i}"), "1"]),
            Frame::Simple(b"OK".to_vec())
        );
    }
    wait_for("every client to be closed", 20, || {
        (info(&s, "connected_clients_rdma") == 0).then_some(())
    });
    assert_eq!(info(&s, "rdma_connections_accepted"), 201);
    // Their rings came back to the pool and served the next ones: only the
    // first connections (those open at once) registered any.
    let hits = info(&s, "rdma_conn_mr_cache_hits");
    let misses = info(&s, "rdma_conn_mr_cache_misses");
    assert_eq!(hits + misses, 201);
    assert!(misses <= 4, "misses {misses}");
    assert_eq!(tcp(&s).cmd(&["DBSIZE"]), Frame::Integer(200));
    // The server still accepts and serves.
    let mut r = Raw {
        s: Stream::rdma(ep),
    };
    assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    // And a server killed under a client ends the client's stream.
    let mut r2 = Raw {
        s: Stream::rdma(ep),
    };
    assert_eq!(r2.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    drop(s);
    // Ended: an end of stream or a failed one, not the read timeout.
    let mut b = [0u8; 1];
    let read = r2.s.read(&mut b);
    assert!(
        matches!(&read, Ok(0))
            || matches!(&read, Err(e) if e.kind() != std::io::ErrorKind::TimedOut),
        "the stream did not end: {read:?}"
    );
}

#[test]
fn idle_rdma_clients_get_keepalives_they_never_see() {
    let (s, ep) = server(&["--rdma-keepalive", "1"]);
    let mut r = Raw {
        s: Stream::rdma(ep),
    };
    assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    // Silent for 3.5 s: the server writes an empty keepalive about each second.
    std::thread::sleep(Duration::from_millis(3500));
    let sent = info(&s, "rdma_conn_keepalives");
    assert!((2..=4).contains(&sent), "keepalives {sent}");
    // The client's stream skipped them: the next reply is the next bytes.
    assert_eq!(r.cmd(&["ECHO", "after"]), Frame::Bulk(b"after".to_vec()));
    // A busy client gets none (its replies are writes).
    let before = info(&s, "rdma_conn_keepalives");
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(1500) {
        assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(info(&s, "rdma_conn_keepalives"), before);
}

#[test]
fn requests_cut_anywhere_by_small_slots_run_exactly_once_and_in_order() {
    // 1 KiB slots: the client's writes cut requests at every kind of place
    // (inside a header, a length, a value, an inline command); the server
    // parses them where they land and completes the cut ones from the next
    // slot.
    let (s, ep) = server(&["--rdma-conn-slot-size", "1kb", "--rdma-conn-slots", "4"]);
    let mut r = Raw {
        s: Stream::rdma(ep),
    };
    let mut batch = Vec::new();
    let mut expect = Vec::new();
    let mut seed = 0x9e37_79b9_u64;
    let mut values = Vec::new();
    let mut ctr = 0;
    for i in 0..3000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        match i % 4 {
            0 => {
                let len = (seed >> 33) as usize % 3000;
                let v: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
                batch.extend_from_slice(&Frame::command(&[
                    b"SET".as_slice(),
                    format!("k{i}").as_bytes(),
                    &v,
                ]));
                expect.push(Frame::Simple(b"OK".to_vec()));
                values.push((i, v));
            }
            1 => {
                batch.extend_from_slice(b"INCR ctr\r\n");
                ctr += 1;
                expect.push(Frame::Integer(ctr));
            }
            2 => {
                let (k, v) = values.last().unwrap();
                batch.extend_from_slice(&Frame::command(&["GET", &format!("k{k}")]));
                expect.push(Frame::Bulk(v.clone()));
            }
            _ => {
                batch.extend_from_slice(&Frame::command(&["PING"]));
                expect.push(Frame::Simple(b"PONG".to_vec()));
            }
        }
    }
    r.send(&batch);
    let replies = r.read_frames(expect.len());
    for (i, (got, want)) in replies.iter().zip(&expect).enumerate() {
        assert!(got == want, "reply {i}: {got:?}");
    }
    let parsed = info(&s, "rdma_conn_bytes_parsed_in_place");
    assert!(parsed > 0, "nothing parsed in place");
    assert_eq!(
        tcp(&s).cmd(&["GET", "ctr"]),
        Frame::Bulk(ctr.to_string().into_bytes())
    );
}

/// Unpipelined SET / GET pairs over one RDMA connection for `secs`; every
/// reply checked (the knobs change under it).
fn closed_loop(r: &mut Raw, secs: f64, tag: &str) -> u64 {
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        let key = format!("{tag}:{}", n % 512);
        let value = format!("{n:0>100}");
        assert_eq!(r.cmd(&["SET", &key, &value]), Frame::Simple(b"OK".to_vec()));
        assert_eq!(r.cmd(&["GET", &key]), Frame::Bulk(value.into_bytes()));
        n += 1;
    }
    n
}

/// `rdma-autotune yes` on the server: the host's tuner records windows of
/// a live connection's traffic, changes its knobs within the grid while
/// every reply stays right, saves what it learned in the data directory,
/// and a restarted server starts that host warm.
#[test]
fn connection_autotune_tunes_live_knobs_per_host_and_starts_warm_after_a_restart() {
    let (mut s, ep) = server(&["--rdma-autotune", "yes", "--rdma-autotune-window-ms", "100"]);
    let mut r = Raw {
        s: Stream::rdma(ep),
    };
    let pairs = closed_loop(&mut r, 5.0, "a");
    let windows = info(&s, "rdma_conn_tune_windows");
    assert!(windows >= 5, "{windows} windows in {pairs} request pairs");
    assert_eq!(info(&s, "rdma_conn_autotune"), 1);
    assert_eq!(
        info_text(&s, "rdma_conn_tune_host").as_deref(),
        Some("127.0.0.1")
    );
    assert_eq!(
        info_text(&s, "rdma_conn_tune_start").as_deref(),
        Some("cold")
    );
    // One snapshot: the setting, and the poll time in force, which is the
    // host's own while it has a connection open.
    let text = tcp(&s).cmd(&["INFO", "rdma"]);
    let text = String::from_utf8_lossy(text.as_bytes().unwrap()).into_owned();
    let field = |name: &str| -> i64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .trim()
            .parse()
            .unwrap()
    };
    let in_grid = |name: &str, grid: &[i64]| {
        let v = field(name);
        assert!(grid.contains(&v), "{name} {v} not in {grid:?}");
        v
    };
    in_grid("rdma_conn_tune_signal_every", &[1, 2, 4, 8, 16]);
    in_grid("rdma_conn_tune_inline", &[1, 64, 256]);
    let poll = in_grid("rdma_conn_tune_poll_usec", &[1, 16, 64, 256]);
    assert_eq!(field("rdma_conn_poll_usec"), poll);
    // (A loop that always has work never reaches the poll; an idle
    // connection lets it sleep, so it polls first.)
    wait_for("the loop polling before it sleeps", 10, || {
        (info(&s, "rdma_conn_polls_found") + info(&s, "rdma_conn_polls_slept") > 0).then_some(())
    });
    let measured: f64 = info_text(&s, "rdma_conn_tune_measured_mbps")
        .unwrap()
        .parse()
        .unwrap();
    assert!(measured > 0.0);
    // Saved (the incumbent's first measurement, then every 32 windows).
    let state = s.dir.path().join("rdma-conn-tune-127-0-0-1.txt");
    wait_for("the host's tuner saved", 10, || {
        state.exists().then_some(())
    });
    drop(r);
    s.kill_and_restart();
    let mut r = Raw {
        s: Stream::rdma(ep),
    };
    closed_loop(&mut r, 1.5, "b");
    assert_eq!(
        info_text(&s, "rdma_conn_tune_start").as_deref(),
        Some("warm")
    );
    assert!(info(&s, "rdma_conn_tune_windows") >= 1);
    // Turned off: the connection goes back to the configured knobs and
    // the loop to rdma-conn-poll-usec (0).
    tcp(&s).cmd(&["CONFIG", "SET", "rdma-autotune", "no"]);
    closed_loop(&mut r, 0.5, "c");
    assert_eq!(info(&s, "rdma_conn_autotune"), 0);
    assert_eq!(info(&s, "rdma_conn_poll_usec"), 0);
    assert_eq!(info_text(&s, "rdma_conn_tune_windows"), None);
    // On again, under the same open connection: its host's tuner comes
    // back from its file and learns from this connection's traffic.
    tcp(&s).cmd(&["CONFIG", "SET", "rdma-autotune", "yes"]);
    closed_loop(&mut r, 1.5, "d");
    assert!(info(&s, "rdma_conn_tune_windows") >= 1);
    assert_eq!(
        info_text(&s, "rdma_conn_tune_start").as_deref(),
        Some("warm")
    );
}

/// `rdma-conn-poll-usec`: the loop polls RDMA clients before sleeping, and
/// replies stay right.
#[test]
fn the_loop_polls_rdma_clients_before_it_sleeps_when_asked() {
    let (s, ep) = server(&["--rdma-conn-poll-usec", "200"]);
    let mut r = Raw {
        s: Stream::rdma(ep),
    };
    closed_loop(&mut r, 1.0, "p");
    assert_eq!(info(&s, "rdma_conn_poll_usec"), 200);
    // Out-of-range values of the new options are refused, the old value kept.
    for (name, bad) in [
        ("rdma-conn-poll-usec", "100001"),
        ("rdma-conn-poll-usec", "-1"),
        ("rdma-conn-inline-bytes", "x"),
        ("rdma-autotune-window-ms", "5"),
    ] {
        let reply = tcp(&s).cmd(&["CONFIG", "SET", name, bad]);
        assert!(matches!(reply, Frame::Error(_)), "{name} {bad}: {reply:?}");
    }
    assert_eq!(info(&s, "rdma_conn_poll_usec"), 200);
    // A request that lands while the loop polls is found there (on a
    // loaded machine the loop may have had work at every turn so far:
    // more load until one is).
    wait_for("a poll that found work", 30, || {
        closed_loop(&mut r, 0.2, "q");
        (info(&s, "rdma_conn_polls_found") > 0).then_some(())
    });
    // Idle, it polls, finds nothing, and sleeps.
    wait_for("a poll that slept", 10, || {
        (info(&s, "rdma_conn_polls_slept") > 0).then_some(())
    });
    // With no RDMA client, nothing polls.
    drop(r);
    wait_for("the RDMA client gone", 10, || {
        (info(&s, "rdma_connections") == 0).then_some(())
    });
    assert_eq!(info(&s, "rdma_conn_poll_usec"), 0);
}
