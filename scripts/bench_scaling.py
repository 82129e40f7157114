#!/usr/bin/env python3
"""How ferrokv's throughput scales with I/O threads (docs/io-threads.md),
beside Valkey 8.0.1 and Redis 7.0.15 with the same thread counts.

  python3 scripts/bench_scaling.py --io-threads 1,2,4,8,16 --pin
      [--clients 650] [--size 512] [--requests 2000000] [--rounds 3]
      [--servers ferrokv,valkey,redis] [--load-cpus 8]

Made for a machine with more cores than the largest thread count plus the
load generator (16+ cores; on a 2-core machine it runs, but every thread
shares the two cores and the figures say only that). With `--pin`, each
server's threads are pinned one to a core, cores 0..N-1 (the execution or
main thread on core 0, I/O threads on 1..N-1, by their names in
/proc/PID/task/*/comm), and the load generator gets the cores after them
(`--load-cpus` of them, default: all the rest), so server and clients never
share a core. Without it the scheduler places everything.

The load is redis-benchmark in multi-thread mode (`--threads`, one per load
core, at most 16), SET and GET without pipelining — what Valkey publishes
(650 clients, 512-byte values). Each round starts every server afresh for
each thread count, in rotating order; figures are medians over rounds:
throughput, p99, and the execution thread's CPU µs per request (from
/proc/PID/task/PID/stat).

ferrokv runs as shipped (its threads are used when a batch is large enough
and a core is free of other processes) unless `--forced` adds
`events-per-io-thread 0`.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpu_seconds, free_port, start_server  # noqa: E402
from bench_io_threads import VALKEY  # noqa: E402

DIRS = []


def tasks(pid):
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                out.append((int(tid), f.read().strip()))
        except OSError:
            pass
    return out


def pin_server(pid, n):
    """The main thread on core 0, I/O threads (named io-thread-N by
    ferrokv, io_thd_N by Redis and Valkey) on cores 1..n-1, helper threads
    (persistence, lazy-free, ...) beside the main thread."""
    for tid, name in tasks(pid):
        core = 0
        for prefix in ("io-thread-", "io_thd_"):
            if name.startswith(prefix) and name[len(prefix):].isdigit():
                core = int(name[len(prefix):]) % max(n, 1)
        subprocess.run(["taskset", "-p", "-c", str(core), str(tid)],
                       capture_output=True, check=True)


def argv_for(server, a, threads):
    if server == "ferrokv":
        argv = [a.ferrokv, "--io-threads", str(threads), "--io-threads-do-reads", "yes"]
        if a.forced:
            argv += ["--events-per-io-thread", "0"]
        return argv
    if server == "valkey":
        return [VALKEY, "--io-threads", str(threads)]
    return ["redis-server", "--io-threads", str(threads), "--io-threads-do-reads", "yes"]


def run_load(port, pid, test, a, load_cpus):
    m0 = cpu_seconds(pid, pid)
    cmd = ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(a.requests), "-r", "1000000",
           "-c", str(a.clients), "-d", str(a.size), "--threads", str(min(len(load_cpus), 16)), "--csv"]
    if load_cpus:
        cmd = ["taskset", "-c", ",".join(map(str, load_cpus))] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m1 = cpu_seconds(pid, pid)
    line = [l for l in out.splitlines() if l.startswith('"' + test.upper())][0]
    f = [x.strip('"') for x in line.split(",")]
    return float(f[1]), float(f[6]), (m1 - m0) / a.requests * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--io-threads", default="1,2,4,8,16")
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--forced", action="store_true")
    ap.add_argument("--clients", type=int, default=650)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--servers", default="ferrokv,valkey,redis")
    ap.add_argument("--load-cpus", type=int, default=0)
    ap.add_argument("--tests", default="set,get")
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    a = ap.parse_args()
    counts = [int(t) for t in a.io_threads.split(",")]
    servers = [s for s in a.servers.split(",") if s != "valkey" or os.path.exists(VALKEY)]
    if not os.path.exists(a.ferrokv):
        subprocess.run(["cargo", "build", "--release", "-p", "ferrokv-server"], cwd=ROOT, check=True)
    ncpu = len(os.sched_getaffinity(0))
    results = {}
    for rnd in range(a.rounds):
        combos = [(s, n) for n in counts for s in servers]
        k = rnd % len(combos)
        for server, n in combos[k:] + combos[:k]:
            load = []
            if a.pin:
                rest = list(range(n, ncpu))
                load = rest[:a.load_cpus] if a.load_cpus else rest
                if not load:
                    print(f"{server} io-threads {n}: no core left for the load on {ncpu} cores",
                          file=sys.stderr)
            port = free_port()
            p = start_server(server, argv_for(server, a, n) +
                             ["--save", "", "--appendonly", "no", "--maxclients", "10000"], port, DIRS)
            try:
                time.sleep(0.2)  # (the I/O threads start after the port opens in Redis)
                if a.pin:
                    pin_server(p.pid, n)
                for test in a.tests.split(","):
                    r = run_load(port, p.pid, test, a, load)
                    results.setdefault((server, n, test), []).append(r)
                    print(f"round {rnd} {server} io-threads {n} {test}: {r[0]:,.0f} req/s, "
                          f"p99 {r[1]:.3f} ms, main thread {r[2]:.3f} us/req",
                          file=sys.stderr, flush=True)
            finally:
                p.kill()
                p.wait()
    print(f"{ncpu} cores, {a.clients} clients, {a.size}-byte values, pinned: {a.pin}")
    print("| test | io-threads | " + " | ".join(f"{s} req/s | {s} p99 ms | {s} main us/req" for s in servers) + " |")
    print("|---|---|" + "---|---|---|" * len(servers))
    for test in a.tests.split(","):
        for n in counts:
            cells = []
            for s in servers:
                rows = results[(s, n, test)]
                med = [statistics.median(r[i] for r in rows) for i in range(3)]
                cells.append(f"{med[0]:,.0f} | {med[1]:.3f} | {med[2]:.3f}")
            print(f"| {test.upper()} | {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
