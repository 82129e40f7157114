//! Guards the latency monitor and `INFO latencystats` against Redis 7.0:
//! that a command slower than `latency-monitor-threshold` becomes a
//! `command` event with the reply shapes of `LATENCY LATEST` ([event,
//! time, latest ms, max ms]) and `HISTORY` ([[time, ms], ...]), RESET's
//! count and name matching, DOCTOR's "nothing to report", and the
//! per-command percentile lines with their options and `CONFIG RESETSTAT`.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the same assertions against the
//! real `redis-server`.
mod common;
use common::{Raw, ServerProcess};
use ferrokv_resp::Frame;

fn start(extra: &[&str]) -> ServerProcess {
    let mut args = vec!["--latency-monitor-threshold", "1"];
    args.extend_from_slice(extra);
    if std::env::var("FERROKV_TESTS_TARGET").as_deref() == Ok("redis") {
        ServerProcess::redis(&args)
    } else {
        args.extend_from_slice(&["--enable-debug-command", "yes"]);
        ServerProcess::ferrokv(&args)
    }
}

fn unix_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn ok() -> Frame {
    Frame::Simple(b"OK".to_vec())
}

fn text(f: Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Verbatim(_, b) => String::from_utf8(b).unwrap(),
        other => panic!("not a string: {other:?}"),
    }
}

fn info(c: &mut Raw, section: &str) -> String {
    text(c.cmd(&["INFO", section]))
}

fn field(info: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()).map(str::to_string))
}

/// `p50=1.003,p99=...` as (percentile, µs) pairs.
fn percentiles(value: &str) -> Vec<(String, f64)> {
    value
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("p<n>=<usec>");
            (k.to_string(), v.parse().expect("a number"))
        })
        .collect()
}

#[test]
fn slow_command_is_a_command_event_in_latest_and_history() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Frame::Array(vec![]));
    let t0 = unix_secs();
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    let latest = c.cmd(&["LATENCY", "LATEST"]);
    let Frame::Array(events) = latest else {
        panic!("{latest:?}")
    };
    assert_eq!(events.len(), 1, "{events:?}");
    let Frame::Array(e) = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(e.len(), 4);
    assert_eq!(e[0], Frame::Bulk(b"command".to_vec()));
    let (Frame::Integer(when), Frame::Integer(ms), Frame::Integer(max)) = (&e[1], &e[2], &e[3])
    else {
        panic!("{e:?}")
    };
    assert!((when - t0).abs() <= 2, "{when} vs {t0}");
    assert!((20..1000).contains(ms), "{ms}");
    assert_eq!(max, ms);

    let history = c.cmd(&["LATENCY", "HISTORY", "command"]);
    assert_eq!(
        history,
        Frame::Array(vec![Frame::Array(vec![
            Frame::Integer(*when),
            Frame::Integer(*ms)
        ])])
    );
    let g = text(c.cmd(&["LATENCY", "GRAPH", "command"]));
    let head = format!("command - high {ms} ms, low {ms} ms (all time high {max} ms)\n");
    assert!(g.starts_with(&head), "{g}");
    assert_eq!(
        c.cmd(&["LATENCY", "GRAPH", "nope"]),
        Frame::Error(b"ERR No samples available for event 'nope'".to_vec())
    );
    // HISTORY looks the event up by its exact name; unknown events are empty.
    assert_eq!(
        c.cmd(&["LATENCY", "HISTORY", "COMMAND"]),
        Frame::Array(vec![])
    );
    assert_eq!(
        c.cmd(&["LATENCY", "HISTORY", "no-such-event"]),
        Frame::Array(vec![])
    );
}

#[test]
fn max_is_kept_across_seconds_and_history_is_oldest_first() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.05"]), ok());
    // Into the next second, so a second sample is written.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    let Frame::Array(h) = c.cmd(&["LATENCY", "HISTORY", "command"]) else {
        panic!()
    };
    assert_eq!(h.len(), 2, "{h:?}");
    let sample = |f: &Frame| match f {
        Frame::Array(v) => match (&v[0], &v[1]) {
            (Frame::Integer(t), Frame::Integer(ms)) => (*t, *ms),
            _ => panic!("{v:?}"),
        },
        other => panic!("{other:?}"),
    };
    let (t1, ms1) = sample(&h[0]);
    let (t2, ms2) = sample(&h[1]);
    assert!(t1 < t2, "{t1} {t2}");
    assert!(ms1 >= 50 && (20..50).contains(&ms2), "{ms1} {ms2}");
    let Frame::Array(latest) = c.cmd(&["LATENCY", "LATEST"]) else {
        panic!()
    };
    assert_eq!(
        latest[0],
        Frame::Array(vec![
            Frame::Bulk(b"command".to_vec()),
            Frame::Integer(t2),
            Frame::Integer(ms2),
            Frame::Integer(ms1),
        ])
    );
}

#[test]
fn latency_reset_counts_the_events_it_drops_matching_any_case() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), Frame::Integer(0));
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    assert_eq!(
        c.cmd(&["LATENCY", "RESET", "COMMAND", "nope"]),
        Frame::Integer(1)
    );
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Frame::Array(vec![]));
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    assert_eq!(c.cmd(&["LATENCY", "RESET"]), Frame::Integer(1));
    assert_eq!(
        c.cmd(&["LATENCY", "HISTORY", "command"]),
        Frame::Array(vec![])
    );
}

#[test]
fn threshold_zero_records_nothing_and_doctor_says_so() {
    let srv = start(&[]);
    let mut c = srv.raw();
    let report = text(c.cmd(&["LATENCY", "DOCTOR"]));
    assert!(
        report
            .to_ascii_lowercase()
            .contains("no latency spike was observed"),
        "{report}"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "0"]),
        ok()
    );
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    assert_eq!(c.cmd(&["LATENCY", "LATEST"]), Frame::Array(vec![]));
    let report = text(c.cmd(&["LATENCY", "DOCTOR"]));
    assert!(
        report.contains("Latency monitoring is disabled"),
        "{report}"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "1"]),
        ok()
    );
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    let report = text(c.cmd(&["LATENCY", "DOCTOR"]));
    assert!(report.contains("1. command: 1 latency spikes"), "{report}");
}

#[test]
fn info_latencystats_prints_each_commands_percentiles() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    let all = info(&mut c, "all");
    assert!(all.contains("# Latencystats\r\n"), "{all}");
    assert!(!info(&mut c, "default").contains("# Latencystats"));

    let stats = info(&mut c, "latencystats");
    assert!(stats.starts_with("# Latencystats\r\n"), "{stats}");
    let debug = field(&stats, "latency_percentiles_usec_debug").expect("debug's line");
    let p = percentiles(&debug);
    let names: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["p50", "p99", "p99.9"]);
    for (_, usec) in &p {
        assert!((20_000.0..1_000_000.0).contains(usec), "{debug}");
    }
    // Three decimals, as Redis prints them.
    for kv in debug.split(',') {
        let usec = kv.split_once('=').unwrap().1;
        assert_eq!(usec.split_once('.').unwrap().1.len(), 3, "{debug}");
    }
    // Subcommands are named container|sub.
    assert!(field(&stats, "latency_percentiles_usec_info").is_some());

    assert_eq!(
        c.cmd(&[
            "CONFIG",
            "SET",
            "latency-tracking-info-percentiles",
            "0.5 50.000 100"
        ]),
        ok()
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "latency-tracking-info-percentiles"]),
        Frame::Array(vec![
            Frame::Bulk(b"latency-tracking-info-percentiles".to_vec()),
            Frame::Bulk(b"0.5 50 100".to_vec()),
        ])
    );
    let debug = field(
        &info(&mut c, "latencystats"),
        "latency_percentiles_usec_debug",
    )
    .unwrap();
    let names: Vec<String> = percentiles(&debug).into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, ["p0.5", "p50", "p100"]);

    // RESETSTAT forgets the distributions (its own call is recorded after).
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    let stats = info(&mut c, "latencystats");
    assert_eq!(field(&stats, "latency_percentiles_usec_debug"), None);
    assert!(field(&stats, "latency_percentiles_usec_config|resetstat").is_some());

    // With tracking off, the section is its header alone.
    assert_eq!(c.cmd(&["CONFIG", "SET", "latency-tracking", "no"]), ok());
    assert_eq!(info(&mut c, "latencystats"), "# Latencystats\r\n");
}

#[test]
fn latency_histogram_replies_cumulative_power_of_two_buckets() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["CONFIG", "RESETSTAT"]), ok());
    assert_eq!(c.cmd(&["DEBUG", "SLEEP", "0.02"]), ok());
    let reply = c.cmd(&["LATENCY", "HISTOGRAM", "debug", "no-such-command"]);
    let Frame::Array(top) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(top.len(), 2, "{top:?}");
    assert_eq!(top[0], Frame::Bulk(b"debug".to_vec()));
    let Frame::Array(fields) = &top[1] else {
        panic!("{top:?}")
    };
    assert_eq!(fields[0], Frame::Bulk(b"calls".to_vec()));
    assert_eq!(fields[1], Frame::Integer(1));
    assert_eq!(fields[2], Frame::Bulk(b"histogram_usec".to_vec()));
    let Frame::Array(buckets) = &fields[3] else {
        panic!("{fields:?}")
    };
    // One bucket: the power of two above 20 ms, as the histogram rounds
    // it (2^25 ns shows as 33816 µs on Redis 7.0 too).
    assert_eq!(buckets.len(), 2, "{buckets:?}");
    assert!(
        matches!(buckets[0], Frame::Integer(us) if us >= 20_000),
        "{buckets:?}"
    );
    assert_eq!(buckets[1], Frame::Integer(1));
    // A container brings its subcommands; in RESP3 the reply is a map.
    c.cmd(&["HELLO", "3"]);
    let reply = c.cmd(&["LATENCY", "HISTOGRAM", "config"]);
    let Frame::Map(m) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(m.len(), 1, "{m:?}");
    assert_eq!(m[0].0, Frame::Bulk(b"config|resetstat".to_vec()));
}

#[test]
fn latency_options_refuse_values_redis_refuses() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "latency-tracking*"])
            .to_string_lossy_sorted(),
        vec![
            "50 99 99.9".to_string(),
            "latency-tracking".into(),
            "latency-tracking-info-percentiles".into(),
            "yes".into(),
        ]
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-tracking-info-percentiles", "50 101"]),
        Frame::Error(b"ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".to_vec())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "latency-monitor-threshold", "-1"]),
        Frame::Error(b"ERR CONFIG SET failed (possibly related to argument 'latency-monitor-threshold') - argument must be between 0 and 9223372036854775807 inclusive".to_vec())
    );
    assert_eq!(
        c.cmd(&["CONFIG", "GET", "latency-monitor-threshold"]),
        Frame::Array(vec![
            Frame::Bulk(b"latency-monitor-threshold".to_vec()),
            Frame::Bulk(b"1".to_vec()),
        ])
    );
}

#[test]
fn latency_help_and_arity_errors_match_redis() {
    let srv = start(&[]);
    let mut c = srv.raw();
    assert_eq!(
        c.cmd(&["LATENCY", "HISTORY"]),
        Frame::Error(b"ERR wrong number of arguments for 'latency|history' command".to_vec())
    );
    assert_eq!(
        c.cmd(&["LATENCY", "LATEST", "x"]),
        Frame::Error(b"ERR wrong number of arguments for 'latency|latest' command".to_vec())
    );
    assert_eq!(
        c.cmd(&["LATENCY", "NOPE"]),
        Frame::Error(b"ERR unknown subcommand 'NOPE'. Try LATENCY HELP.".to_vec())
    );
    let Frame::Array(help) = c.cmd(&["LATENCY", "HELP"]) else {
        panic!()
    };
    assert_eq!(
        help[0],
        Frame::Simple(b"LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".to_vec())
    );
    assert_eq!(
        help.last(),
        Some(&Frame::Simple(b"    Prints this help.".to_vec()))
    );
}

#[test]
fn redis_client_sees_the_latest_event() {
    let srv = start(&[]);
    let mut con = srv.client();
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg("0.02")
        .query(&mut con)
        .unwrap();
    let latest: Vec<(String, i64, i64, i64)> =
        redis::cmd("LATENCY").arg("LATEST").query(&mut con).unwrap();
    assert_eq!(latest.len(), 1);
    assert_eq!(latest[0].0, "command");
    assert!(
        latest[0].2 >= 20 && latest[0].3 >= latest[0].2,
        "{latest:?}"
    );
}

trait SortedStrings {
    fn to_string_lossy_sorted(self) -> Vec<String>;
}

impl SortedStrings for Frame {
    /// A flat array of bulk strings as sorted strings (CONFIG GET's order
    /// is not fixed).
    fn to_string_lossy_sorted(self) -> Vec<String> {
        let Frame::Array(v) = self else {
            panic!("{self:?}")
        };
        let mut s: Vec<String> = v.into_iter().map(text).collect();
        s.sort();
        s
    }
}
