#!/usr/bin/env python3
"""YCSB workloads C and A over TCP, a Unix socket and RDMA connections, to
one ferrokv-server in the same run (issue #17's table shape).

For each value size and workload, every transport runs in turn (rounds
rotate who goes first); ops/s, mean / p99 / p99.9 latency and the
server's CPU time per operation (from /proc) are the medians of the
rounds. RDMA here is libfabric's tcp provider — TCP underneath, on
loopback — so the figures show the protocol's costs (rings, credits, the
provider's own progress), not RDMA's one-sided saving, which needs
verbs hardware.

  python3 scripts/bench_transports.py [--rounds 3] [--operations 100000]
      [--sizes 1024,4096,16384] [--connections 4] [--pipeline 1]
      [--transports tcp,unix,rdma,rdma-noinject] [--workloads c,a]
      [--baseline OLD-ferrokv-server]

`--baseline` starts a second server from an older binary beside the
first, and every transport runs against both in the same rounds (rows
`<transport>@before`).

Needs target/release/ferrokv-server and ferrokv-bench
(cargo build --release -p ferrokv-server -p ferrokv-bench) and libfabric.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpu_seconds, free_port  # noqa: E402

BIN = os.path.join(ROOT, "target", "release")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--operations", type=int, default=100000)
    ap.add_argument("--records", type=int, default=10000)
    ap.add_argument("--sizes", default="1024,4096,16384")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--transports", default="tcp,unix,rdma",
                    help="which to run; rdma-noinject: RDMA with rdma-conn-inject no")
    ap.add_argument("--workloads", default="c,a")
    ap.add_argument("--baseline", help="an older ferrokv-server binary, run beside this one")
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-transports-")
    binaries = {"": os.path.join(BIN, "ferrokv-server")}
    if a.baseline:
        binaries["@before"] = a.baseline
    servers = {}
    for suffix, binary in binaries.items():
        port, rport = free_port(), free_port()
        sock = os.path.join(d, f"s{suffix}.sock")
        sd = tempfile.mkdtemp(dir=d)
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--dir", sd, "--save", "",
             "--unixsocket", sock, "--rdma-bind", "127.0.0.1", "--rdma-port", str(rport)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        servers[suffix] = (proc, port, {
            "tcp": ("tcp", f"127.0.0.1:{port}"), "unix": ("unix", sock),
            "rdma": ("rdma", f"127.0.0.1:{rport}"), "rdma-noinject": ("rdma", f"127.0.0.1:{rport}")})
    names = a.transports.split(",")
    # (row name, transport name, address, server)
    targets = [(n + suffix, n, known[n][1], suffix)
               for suffix, (_, _, known) in servers.items() for n in names]
    rows = []
    try:
        for size in [int(s) for s in a.sizes.split(",")]:
            # Load once per size and server (over TCP), then the run phases.
            for _, port, _ in servers.values():
                subprocess.run([os.path.join(BIN, "ferrokv-bench"), "run", "-s", f"127.0.0.1:{port}",
                                "--phase", "load", "--records", str(a.records), "--value-size",
                                str(size), "--fields", "1", "--data-model", "string",
                                "--no-progress", "--flush", "--out", os.path.join(d, "load")],
                               check=True, capture_output=True)
            for workload in a.workloads.split(","):
                got = {}
                for rnd in range(a.rounds):
                    order = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
                    for name, tname, addr, suffix in order:
                        server, port, known = servers[suffix]
                        out = os.path.join(d, f"o-{name}")
                        # New RDMA connections take the value in force.
                        inject = "no" if tname == "rdma-noinject" else "yes"
                        subprocess.run(["redis-cli", "-p", str(port), "config", "set", "rdma-conn-inject",
                                        inject], check=True, capture_output=True)
                        c0 = cpu_seconds(server.pid)
                        subprocess.run(
                            [os.path.join(BIN, "ferrokv-bench"), "run", "--transport", known[tname][0], "-s", addr,
                             "--phase", "run", "-w", workload, "--records", str(a.records),
                             "--operations", str(a.operations), "--value-size", str(size),
                             "--fields", "1", "--data-model", "string", "-c", str(a.connections),
                             "-P", str(a.pipeline), "--no-progress", "--out", out],
                            check=True, capture_output=True)
                        cpu = cpu_seconds(server.pid) - c0
                        doc = json.load(open(os.path.join(out, "results.json")))
                        phase = [p for p in doc["phases"] if p["phase"] == "run"][0]
                        ops = phase["ops"]
                        total = sum(o["count"] for o in ops)
                        # Latency of the whole mix: the count-weighted mean, the worst p99s.
                        mean = sum(o["mean_us"] * o["count"] for o in ops) / total
                        p99 = max(o["p99_us"] for o in ops)
                        p999 = max(o["p999_us"] for o in ops)
                        rate = total / phase["measured_sec"]
                        got.setdefault(name, []).append((rate, mean, p99, p999, cpu / total * 1e6))
                        print(f"{size} {workload} {name} round {rnd}: {rate:,.0f} ops/s", file=sys.stderr)
                for name, *_ in targets:
                    med = [statistics.median(x[i] for x in got[name]) for i in range(5)]
                    rows.append((size, workload.upper(), name, *med))
    finally:
        for server, _, _ in servers.values():
            server.kill()
            server.wait()
        shutil.rmtree(d, ignore_errors=True)
    print(f"YCSB, {a.connections} connections, pipeline {a.pipeline}, {a.operations} ops, "
          f"median of {a.rounds} rounds")
    print("| value | workload | transport | ops/s | mean µs | p99 µs | p99.9 µs | server CPU µs/op |")
    print("|---|---|---|---|---|---|---|---|")
    for size, w, name, rate, mean, p99, p999, cpu in rows:
        print(f"| {size // 1024} KB | {w} | {name} | {rate:,.0f} | {mean:.0f} | {p99:.0f} | {p999:.0f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
