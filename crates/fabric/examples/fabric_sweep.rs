//! Throughput sweep that picks the RDMA sync's defaults: write-with-immediate over the tcp
//! provider for chunk sizes × windows (ring slots K = window), beside plain TCP `send` of the
//! same bytes. Both peers run in this process on their own threads and *wait* on their queue
//! fds (`fi_trywait` + `poll`), never spin. Results go in docs/fabric.md.
//!
//! ```text
//! cargo run --release -p ferrokv-fabric --example fabric_sweep -- [--total-mib 1024] [--reps 3]
//!     [--chunks-kib 256,512,1024,2048,4096] [--windows 4,8,16,32]
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use ferrokv_fabric::Listener;

struct Args {
    total: u64,
    reps: usize,
    chunks: Vec<u32>,
    windows: Vec<u32>,
}

fn parse_list(value: &str) -> Vec<u32> {
    value
        .split(',')
        .map(|v| v.trim().parse().expect("a number"))
        .collect()
}

fn args() -> Args {
    let mut args = Args {
        total: 1 << 30,
        reps: 3,
        chunks: vec![256, 512, 1024, 2048, 4096],
        windows: vec![4, 8, 16, 32],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--total-mib" => args.total = value.parse::<u64>().unwrap() << 20,
            "--reps" => args.reps = value.parse().unwrap(),
            "--chunks-kib" => args.chunks = parse_list(&value),
            "--windows" => args.windows = parse_list(&value),
            other => panic!("unknown flag {other}"),
        }
    }
    args.chunks.iter_mut().for_each(|c| *c <<= 10);
    args
}

/// One RDMA transfer of `total` bytes in `chunk`-byte writes, `window` in flight, K = window.
fn rdma_once(
    lib: &std::sync::Arc<ferrokv_fabric::Library>,
    total: u64,
    chunk: u32,
    window: u32,
) -> Duration {
    let config = RingConfig {
        slots: window,
        slot_size: chunk,
        total,
        window,
    };
    let listener = Listener::bind(lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = thread::spawn(move || {
        let mut sender = RingSender::accept(&listener, window, TEST_TOKEN).unwrap();
        sender.prefill_source();
        let start = Instant::now();
        sender.run(total, &mut Waiter::Fd, None, None).unwrap();
        start.elapsed()
    });
    let mut receiver = RingReceiver::connect(lib, addr, config, TEST_TOKEN).unwrap();
    let stats = receiver.run(&mut Waiter::Fd, |_, _| Ok(())).unwrap();
    assert_eq!(stats.bytes, total);
    sender.join().unwrap()
}

/// Plain TCP: blocking `write_all` of `chunk`-byte pieces, `read_exact` into one chunk buffer.
fn tcp_once(total: u64, chunk: u32) -> Duration {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; chunk as usize];
        let mut left = total;
        while left > 0 {
            let n = left.min(u64::from(chunk)) as usize;
            stream.read_exact(&mut buf[..n]).unwrap();
            left -= n as u64;
        }
        stream.write_all(b"k").unwrap();
    });
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut buf = vec![0u8; chunk as usize];
    fill_pattern(0, &mut buf);
    let start = Instant::now();
    let mut left = total;
    while left > 0 {
        let n = left.min(u64::from(chunk)) as usize;
        stream.write_all(&buf[..n]).unwrap();
        left -= n as u64;
    }
    // Done when the receiver has read everything (it acknowledges with one byte).
    let mut ack = [0u8; 1];
    stream.read_exact(&mut ack).unwrap();
    let took = start.elapsed();
    receiver.join().unwrap();
    took
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn median_gbps(total: u64, mut runs: Vec<Duration>) -> f64 {
    runs.sort();
    total as f64 / runs[runs.len() / 2].as_secs_f64() / 1e9
}

fn main() {
    let args = args();
    let lib = library().expect("libfabric is needed for the sweep");
    let load_before = loadavg();
    eprintln!(
        "libfabric {}, provider tcp, {} MiB per run, median of {} runs",
        lib.version_string(),
        args.total >> 20,
        args.reps
    );
    // Repetitions are the outer loop, so a burst of load from elsewhere on the machine lands
    // on every cell alike instead of on one column.
    let cells: Vec<(u32, Option<u32>)> = args
        .chunks
        .iter()
        .flat_map(|&c| {
            args.windows
                .iter()
                .map(move |&w| (c, Some(w)))
                .chain([(c, None)])
        })
        .collect();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); cells.len()];
    for rep in 0..args.reps {
        eprintln!("rep {}/{} (load {})", rep + 1, args.reps, loadavg());
        for (cell, &(chunk, window)) in cells.iter().enumerate() {
            samples[cell].push(match window {
                Some(window) => rdma_once(&lib, args.total, chunk, window),
                None => tcp_once(args.total, chunk),
            });
        }
    }
    let mut header = String::from("| chunk |");
    let mut rule = String::from("|---|");
    for w in &args.windows {
        header += &format!(" writedata W={w} |");
        rule += "---|";
    }
    header += " TCP send |";
    rule += "---|";
    println!("{header}\n{rule}");
    let mut samples = samples.into_iter();
    for &chunk in &args.chunks {
        let mut row = format!("| {} KiB |", chunk >> 10);
        for _ in 0..=args.windows.len() {
            row += &format!(" {:.2} |", median_gbps(args.total, samples.next().unwrap()));
        }
        println!("{row}");
    }
    println!("\n(GB/s = 10^9 bytes/s, sender's view: first write to last credit back)");
    println!("load average before: {load_before}, after: {}", loadavg());
}
