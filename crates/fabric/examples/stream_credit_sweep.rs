//! How often a stream's reader should hand slots back (`StreamConfig::credit_every`): one
//! `Stream` pair in this process (tcp provider), a writer thread streaming `--total-mib` in
//! 16 KiB application writes and a reader draining it in 16 KiB reads, both waiting on their
//! queue fds; for each granularity, the median rate of `--reps` runs, the credit messages
//! sent and the writer's credit stalls. `--sweep signal` sweeps the completion signalling
//! interval (`StreamConfig::signal_every`) instead, with credits every K/4 slots. Results and
//! the choices: docs/rdma.md.
//!
//! ```text
//! cargo run --release -p ferrokv-fabric --example stream_credit_sweep -- [--total-mib 256]
//!     [--reps 3] [--slots 16] [--slot-kib 64] [--sweep credit|signal]
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use common::stream_io::{pair, read_exact, write_all};
use ferrokv_fabric::StreamConfig;

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let Some(lib) = common::library() else { return };
    let total = arg("--total-mib", 256) << 20;
    let reps = arg("--reps", 3) as usize;
    let slots = arg("--slots", 16) as u32;
    let slot_size = (arg("--slot-kib", 64) << 10) as u32;
    let signal = std::env::args().any(|a| a == "signal");
    println!(
        "| {} | MiB/s (median of {reps}) | credit messages | writer stalls | completions requested |",
        if signal { "signal_every" } else { "credit_every" }
    );
    println!("|---|---|---|---|---|");
    let mut every = 1;
    while every <= slots {
        let config = StreamConfig {
            slots,
            slot_size,
            credit_every: if signal { (slots / 4).max(1) } else { every },
            inject: true,
            signal_every: if signal { every } else { 1 },
        };
        let mut rates = Vec::new();
        let (mut credits, mut stalls, mut signalled) = (0, 0, 0);
        for _ in 0..reps {
            let (mut a, mut b) = pair(&lib, config, config);
            let start = Instant::now();
            let writer = std::thread::spawn(move || {
                let chunk = vec![0x5au8; 16 << 10];
                let mut sent = 0;
                while sent < total {
                    write_all(&mut a, &chunk);
                    sent += chunk.len() as u64;
                }
                a
            });
            let mut buf = vec![0u8; 16 << 10];
            let mut got = 0;
            while got < total {
                read_exact(&mut b, &mut buf);
                got += buf.len() as u64;
            }
            let a = writer.join().unwrap();
            rates.push(total as f64 / (1 << 20) as f64 / start.elapsed().as_secs_f64());
            credits = b.stats.credits_sent;
            stalls = a.stats.credit_stalls;
            signalled = a.stats.signalled;
        }
        rates.sort_by(|x, y| x.partial_cmp(y).unwrap());
        println!(
            "| {every} | {:.0} | {credits} | {stalls} | {signalled} |",
            rates[rates.len() / 2]
        );
        every *= 2;
    }
}
