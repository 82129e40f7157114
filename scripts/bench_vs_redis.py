#!/usr/bin/env python3
"""Throughput, CPU cost and memory of ferrokv-server beside redis-server.

Both servers run on this machine in the same run; redis-benchmark drives
them in turns (ferrokv, redis, ferrokv, ...) so drifts in machine load hit
both alike. Figures are medians over rounds, and the ratios are what to quote.

  python3 scripts/bench_vs_redis.py [--rounds 5] [--requests 1000000]
      [--baseline path/to/an/older/ferrokv-server]

With --baseline, a second ferrokv-server binary (a build of an earlier
commit) runs in the same rounds, and a table of this build against it is
printed too: how a change moved the per-request cost, measured beside
Redis in one run.

CPU time per request is the server process's user+system time (from
/proc/PID/stat) over the run, divided by the requests it served.
Memory: 1,000,000 keys with 32-byte values loaded with redis-cli --pipe,
then the resident set size of each process.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli, free_port, redis_benchmark, rss_bytes, start_server  # noqa: E402


DIRS = []


def start(name, argv, port):
    extra = ["--save", "", "--appendonly", "no"] if name == "redis" else []
    return start_server(name, argv + extra, port, DIRS)


def bench(port, pid, test, clients, pipeline, n):
    rps, us, _ = redis_benchmark(port, pid, test, clients, pipeline, n, 1_000_000)
    return rps, us


def load_keys(port, n):
    payload = bytearray()
    val = b"v" * 32
    for i in range(n):
        k = b"key:%012d" % i
        payload += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$32\r\n%s\r\n" % (len(k), k, val)
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=bytes(payload),
                   capture_output=True, check=True)


def print_table(results, a, b, a_label, b_label):
    """Medians of server `a` against server `b`, per test: rates, CPU, ratios."""
    print(f"| test | {a_label} req/s | {b_label} req/s | throughput ratio | {a_label} CPU us/req "
          f"| {b_label} CPU us/req | CPU ratio |")
    print("|---|---|---|---|---|---|---|")
    for pipeline in (16, 1):
        for test in ("set", "get"):
            x, y = results[(test, pipeline, a)], results[(test, pipeline, b)]
            xrps, yrps = statistics.median(v[0] for v in x), statistics.median(v[0] for v in y)
            xus, yus = statistics.median(v[1] for v in x), statistics.median(v[1] for v in y)
            print(f"| {test.upper()} -c 50 -P {pipeline} | {xrps:,.0f} | {yrps:,.0f} | {xrps / yrps:.2f}x "
                  f"| {xus:.3f} | {yus:.3f} | {xus / yus:.2f}x |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    ap.add_argument("--baseline", help="an older ferrokv-server binary to compare with")
    a = ap.parse_args()
    if not os.path.exists(a.ferrokv):
        subprocess.run(["cargo", "build", "--release", "-p", "ferrokv-server"], cwd=ROOT, check=True)
    servers = {}
    fp, rp = free_port(), free_port()
    servers["ferrokv"] = (fp, start("ferrokv", [a.ferrokv], fp))
    servers["redis"] = (rp, start("redis", ["redis-server"], rp))
    if a.baseline:
        bp = free_port()
        servers["baseline"] = (bp, start("baseline", [a.baseline], bp))
    results = {}
    try:
        names = list(servers)
        for rnd in range(a.rounds):
            # Each server goes first in turn.
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for pipeline in (16, 1):
                n = a.requests if pipeline == 16 else a.requests // 4
                for test in ("set", "get"):
                    for name in order:
                        port, proc = servers[name]
                        rps, us = bench(port, proc.pid, test, 50, pipeline, n)
                        results.setdefault((test, pipeline, name), []).append((rps, us))
                        print(f"round {rnd} {test} P{pipeline} {name}: {rps:,.0f} req/s, {us:.3f} us CPU/req",
                              file=sys.stderr)
        print_table(results, "ferrokv", "redis", "ferrokv", "redis")
        if a.baseline:
            print()
            print_table(results, "ferrokv", "baseline", "this build", "baseline")
            servers.pop("baseline")[1].kill()
        # Memory on freshly started servers, so nothing left from the
        # throughput runs (allocator caches, client buffers) counts.
        for name in list(servers):
            servers[name][1].kill()
            servers[name][1].wait()
        fp, rp = free_port(), free_port()
        servers["ferrokv"] = (fp, start("ferrokv", [a.ferrokv], fp))
        servers["redis"] = (rp, start("redis", ["redis-server"], rp))
        time.sleep(0.5)
        base = {name: rss_bytes(servers[name][1].pid) for name in servers}
        mem = {}
        for name in ("ferrokv", "redis"):
            port, proc = servers[name]
            load_keys(port, a.keys)
            time.sleep(1)
            assert int(cli(port, "dbsize")) == a.keys, cli(port, "dbsize")
            mem[name] = rss_bytes(proc.pid)
        print()
        print(f"| memory, {a.keys:,} keys x 32-byte values | ferrokv | redis | ratio |")
        print("|---|---|---|---|")
        print(f"| RSS after load | {mem['ferrokv'] / 2**20:.1f} MiB | {mem['redis'] / 2**20:.1f} MiB "
              f"| {mem['ferrokv'] / mem['redis']:.2f}x |")
        fd, rd = mem["ferrokv"] - base["ferrokv"], mem["redis"] - base["redis"]
        print(f"| RSS growth from empty | {fd / 2**20:.1f} MiB | {rd / 2**20:.1f} MiB | {fd / rd:.2f}x |")
    finally:
        for _, p in servers.values():
            p.kill()
            p.wait()
        # Data directories of every server started (they pile up in /tmp).
        for d in DIRS:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
