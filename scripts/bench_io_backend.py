#!/usr/bin/env python3
"""The event loop's kernel cost: ferrokv on io_uring, ferrokv on epoll and
redis-server 7.0, in one run on this machine (docs/io-uring.md).

  python3 scripts/bench_io_backend.py [--rounds 5] [--requests 400000]
      [--conns 50,1000]

redis-benchmark drives the three servers in turns within each round (each
server goes first in turn), so drifts in machine load hit all alike;
figures are medians over rounds, and the ratios are what to quote.

For each test (SET and GET, -P 1 and -P 16, at each connection count):
throughput, the server's CPU time per request (user + system from
/proc/PID/stat over the run, divided by the requests), and redis-benchmark's
p99 latency.
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, free_port, redis_benchmark, start_server  # noqa: E402

DIRS = []


def start(name, argv, port):
    extra = ["--save", "", "--appendonly", "no", "--maxclients", "4096"]
    return start_server(name, argv + extra, port, DIRS)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=400_000)
    ap.add_argument("--conns", default="50,1000")
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    a = ap.parse_args()
    if not os.path.exists(a.ferrokv):
        subprocess.run(["cargo", "build", "--release", "-p", "ferrokv-server"], cwd=ROOT, check=True)
    servers = {}
    for name, argv in (("uring", [a.ferrokv, "--io-backend", "uring"]),
                       ("epoll", [a.ferrokv, "--io-backend", "epoll"]),
                       ("redis", ["redis-server"])):
        port = free_port()
        servers[name] = (port, start(name, argv, port))
    conns = [int(c) for c in a.conns.split(",")]
    tests = [(c, p, t) for c in conns for p in (1, 16) for t in ("set", "get")]
    results = {}
    try:
        names = list(servers)
        for rnd in range(a.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for (clients, pipeline, test) in tests:
                n = a.requests * (4 if pipeline == 16 else 1)
                for name in order:
                    port, proc = servers[name]
                    rps, us, p99 = redis_benchmark(port, proc.pid, test, clients, pipeline, n, 100_000)
                    results.setdefault((clients, pipeline, test, name), []).append((rps, us, p99))
                    print(f"round {rnd} {test} -c {clients} -P {pipeline} {name}: {rps:,.0f} req/s, "
                          f"{us:.3f} us CPU/req, p99 {p99:.3f} ms", file=sys.stderr)
        print("| test | io_uring req/s | epoll req/s | redis req/s | io_uring / redis req/s "
              "| io_uring CPU us/req | epoll CPU us/req | redis CPU us/req "
              "| io_uring / redis CPU | epoll / redis CPU | p99 ms io_uring / epoll / redis |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for (clients, pipeline, test) in tests:
            med = {}
            for name in names:
                rows = results[(clients, pipeline, test, name)]
                med[name] = tuple(statistics.median(r[i] for r in rows) for i in range(3))
            u, e, r = med["uring"], med["epoll"], med["redis"]
            print(f"| {test.upper()} -c {clients} -P {pipeline} | {u[0]:,.0f} | {e[0]:,.0f} | {r[0]:,.0f} "
                  f"| {u[0] / r[0]:.2f}x | {u[1]:.3f} | {e[1]:.3f} | {r[1]:.3f} "
                  f"| {u[1] / r[1]:.2f}x | {e[1] / r[1]:.2f}x | {u[2]:.3f} / {e[2]:.3f} / {r[2]:.3f} |")
    finally:
        for _, p in servers.values():
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
