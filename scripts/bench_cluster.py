#!/usr/bin/env python3
"""Cluster mode against Redis's, in one run on one machine (docs/benchmarks.md):

1. `redis-benchmark --cluster` SET/GET at `-P 16` against a cluster of 3
   ferrokv masters and one of 3 redis-server masters, each made by
   `redis-cli --cluster create`; rounds alternate which cluster goes first.
2. The cost of cluster mode on one node: SET/GET `-P 16` against a node
   with `cluster-enabled yes` serving all 16384 slots, and against the same
   server with cluster mode off (both ferrokv and redis-server): the
   throughput, and the server's CPU time per request (steadier than the
   throughput on a shared 2-core machine, where the client takes a core).
3. The per-slot key index's memory: `used_memory` after 1,000,000 SETs with
   cluster mode on and off (ferrokv and redis-server).

Figures are medians of the rounds.

  python3 scripts/bench_cluster.py [--rounds 5] [--requests 2000000]
                                   [--cluster-requests 10000000]

Part 1 runs many more requests than part 2: with `--cluster`,
redis-benchmark runs a thread per master, and a thread whose clients have
nothing left to send stops only at its next 250 ms throughput timer, so a
run's time (and its ops/s) comes in steps of 250 ms. At 1,000,000 requests
the only figures are 1.0, 1.25, 1.5 s... (998k, 799k, 665k ops/s); at 10
million a step is 2-3% of the run.

Needs target/release/ferrokv-server, redis-server, redis-cli and
redis-benchmark.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli, cpu_seconds, free_port  # noqa: E402

FERROKV = os.path.join(ROOT, "target", "release", "ferrokv-server")


# `--pin`: part 2's servers run on CPU 1 and redis-benchmark on CPU 0, so
# neither takes the other's core (less noise on a shared 2-core machine).
PIN = {"server": [], "client": []}


def start(kind, port, cluster, d, pin=False):
    bin_ = FERROKV if kind == "ferrokv" else "redis-server"
    argv = ([*PIN["server"]] if pin else []) + [
        bin_, "--port", str(port), "--dir", d, "--save", "", "--appendonly", "no"]
    if cluster:
        argv += ["--cluster-enabled", "yes", "--cluster-port", str(free_port()),
                 "--cluster-config-file", f"nodes-{port}.conf"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{bin_} did not start")


def wait_ok(ports):
    for _ in range(300):
        if all("cluster_state:ok" in cli(p, "cluster", "info") for p in ports):
            return
        time.sleep(0.1)
    raise SystemExit("cluster did not become ok")


def bench(port, test, requests, cluster):
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-n", str(requests),
            "-c", "50", "-P", "16", "-r", "1000000", "-q", "--csv"]
    if cluster:
        argv.insert(1, "--cluster")
    else:
        argv = PIN["client"] + argv
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if f and f[0].upper() == test.upper():
            return float(f[1])
    raise SystemExit(f"no figure from redis-benchmark: {out}")


def cluster_of_three(kind, d):
    ports = [free_port() for _ in range(3)]
    procs = [start(kind, p, True, d) for p in ports]
    out = subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                          "--cluster-yes"], capture_output=True, text=True).stdout
    if "All 16384 slots covered" not in out:
        raise SystemExit(out)
    wait_ok(ports)
    return ports, procs


def single(kind, cluster, d):
    port = free_port()
    p = start(kind, port, cluster, d, pin=True)
    if cluster:
        cli(port, "cluster", "addslotsrange", "0", "16383")
        wait_ok([port])
    return port, p


def fill(port, n):
    cmds = "".join(f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n$1\r\nv\r\n"
                   for k in (f"key:{i:08d}" for i in range(n)))
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=cmds.encode(),
                   capture_output=True)


def used_memory(port):
    for line in cli(port, "info", "memory").splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    return 0


def stop(procs):
    for p in procs:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--cluster-requests", type=int, default=10_000_000,
                    help="requests per run of part 1 (see the note on 250 ms steps)")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--parts", default="1,2,3", help="which of the three to run")
    ap.add_argument("--pin", action="store_true",
                    help="part 2: servers on CPU 1, redis-benchmark on CPU 0")
    a = ap.parse_args()
    if a.pin:
        PIN["server"] = ["taskset", "-c", "1"]
        PIN["client"] = ["taskset", "-c", "0"]
    parts = {int(x) for x in a.parts.split(",")}
    d = tempfile.mkdtemp()
    try:
        # 1. Three masters each.
        if 1 in parts:
            part1(a, d)
        if 2 in parts:
            part2(a, d)
        if 3 in parts:
            part3(a, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def part1(a, d):
    res = {(k, t): [] for k in ("ferrokv", "redis") for t in ("set", "get")}
    cpu = {key: [] for key in res}
    clusters = {k: cluster_of_three(k, d) for k in ("ferrokv", "redis")}
    for r in range(a.rounds):
        order = ["ferrokv", "redis"] if r % 2 == 0 else ["redis", "ferrokv"]
        for k in order:
            ports, procs = clusters[k]
            for t in ("set", "get"):
                before = sum(cpu_seconds(p.pid) for p in procs)
                res[(k, t)].append(bench(ports[0], t, a.cluster_requests, True))
                used = sum(cpu_seconds(p.pid) for p in procs) - before
                cpu[(k, t)].append(used / a.cluster_requests)
    for k in clusters:
        stop(clusters[k][1])
    print("3-master cluster, redis-benchmark --cluster -c 50 -P 16, ops/s (median of"
          f" {a.rounds}; CPU = the three servers' CPU time per request):")
    for t in ("set", "get"):
        f, rd = statistics.median(res[("ferrokv", t)]), statistics.median(res[("redis", t)])
        cf = statistics.median(cpu[("ferrokv", t)]) * 1e9
        cr = statistics.median(cpu[("redis", t)]) * 1e9
        print(f"  {t.upper()}: ferrokv {f:,.0f}  redis {rd:,.0f}  ratio {f / rd:.2f}"
              f"   CPU ferrokv {cf:.0f} ns  redis {cr:.0f} ns  ratio {cf / cr:.2f}")


def part2(a, d):
    cost = {(k, c, t): [] for k in ("ferrokv", "redis") for c in (True, False)
            for t in ("set", "get")}
    cpu = {key: [] for key in cost}
    nodes = {(k, c): single(k, c, d) for k in ("ferrokv", "redis") for c in (True, False)}
    for r in range(a.rounds):
        keys = list(nodes)
        keys = keys[r % len(keys):] + keys[:r % len(keys)]
        for k, c in keys:
            port, proc = nodes[(k, c)]
            for t in ("set", "get"):
                before = cpu_seconds(proc.pid)
                cost[(k, c, t)].append(bench(port, t, a.requests, False))
                cpu[(k, c, t)].append((cpu_seconds(proc.pid) - before) / a.requests)
    stop([p for _, p in nodes.values()])
    print("One node, cluster-enabled yes / no, -c 50 -P 16 (medians of"
          f" {a.rounds}; CPU = server CPU time per request):")
    for k in ("ferrokv", "redis"):
        for t in ("set", "get"):
            on = statistics.median(cost[(k, True, t)])
            off = statistics.median(cost[(k, False, t)])
            con = statistics.median(cpu[(k, True, t)]) * 1e9
            coff = statistics.median(cpu[(k, False, t)]) * 1e9
            # Round by round (the two ran within seconds of each other):
            # steadier than the ratio of medians when the machine's load drifts.
            paired = sorted(x / y for x, y in zip(cpu[(k, True, t)], cpu[(k, False, t)]))
            q = len(paired) // 4
            print(f"  {k} {t.upper()}: on {on:,.0f}  off {off:,.0f}  on/off {on / off:.3f}"
                  f"   CPU on {con:.0f} ns  off {coff:.0f} ns  on/off {con / coff:.3f}"
                  f"   CPU on/off by round: median {statistics.median(paired):.3f}"
                  f" (quartiles {paired[q]:.3f}-{paired[-1 - q]:.3f})")

def part3(a, d):
    print(f"used_memory after {a.keys:,} SETs:")
    for k in ("ferrokv", "redis"):
        figs = {}
        for c in (True, False):
            port, p = single(k, c, d)
            fill(port, a.keys)
            figs[c] = used_memory(port)
            stop([p])
        extra = figs[True] - figs[False]
        print(f"  {k}: cluster {figs[True]:,}  plain {figs[False]:,}  index {extra:,} bytes"
              f" ({extra / a.keys:.1f} bytes a key)")


if __name__ == "__main__":
    main()
