#!/usr/bin/env python3
"""The ACL check's cost: redis-benchmark GET/SET with pipelining, as the
default user (unrestricted: one branch) and as a restricted user (command
bitmap and key patterns checked on every command), against one
ferrokv-server and, beside it in the same rounds, redis-server with the
same two users. Rounds interleave the four (server, user) pairs, rotating
who goes first; the figures are medians of the rounds.

  python3 scripts/bench_acl.py [--rounds 5] [--requests 2000000]
      [--clients 50] [--pipeline 16]

Needs target/release/ferrokv-server (cargo build --release -p
ferrokv-server), redis-server and redis-benchmark.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli, cpu_seconds, free_port  # noqa: E402

RULES = ["on", ">benchpw", "resetkeys", "~key:*", "~counter:*", "-@all", "+get", "+set",
         "+ping", "+config|get", "+info"]


def start(argv, port):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{argv[0]} did not start")


def bench(port, test, user, a):
    cmd = ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(a.requests),
           "-c", str(a.clients), "-P", str(a.pipeline), "-r", "100000", "-q", "--csv"]
    if user:
        cmd += ["--user", "app", "-a", "benchpw"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split(",")]
        if f and f[0] == test.upper():
            return float(f[1])
    raise SystemExit(f"no figure in {out!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=2000000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-acl-")
    fport, rport = free_port(), free_port()
    servers = {
        "ferrokv": start([os.path.join(ROOT, "target", "release", "ferrokv-server"), "--port",
                          str(fport), "--dir", d, "--save", ""], fport),
        "redis": start(["redis-server", "--port", str(rport), "--dir", d, "--save", "",
                        "--appendonly", "no"], rport),
    }
    ports = {"ferrokv": fport, "redis": rport}
    for port in ports.values():
        assert cli(port, "ACL", "SETUSER", "app", *RULES) == "OK"
    pairs = [(s, u) for s in ports for u in (False, True)]
    figures = {(s, u, t): [] for s, u in pairs for t in ("get", "set")}
    cpu = {(s, u, t): [] for s, u in pairs for t in ("get", "set")}
    try:
        for r in range(a.rounds):
            order = pairs[r % len(pairs):] + pairs[:r % len(pairs)]
            for s, u in order:
                for t in ("set", "get"):
                    c0 = cpu_seconds(servers[s].pid)
                    figures[(s, u, t)].append(bench(ports[s], t, u, a))
                    cpu[(s, u, t)].append((cpu_seconds(servers[s].pid) - c0) / a.requests * 1e9)
    finally:
        for p in servers.values():
            p.terminate()
    print(f"redis-benchmark -c {a.clients} -P {a.pipeline} -n {a.requests}, "
          f"medians of {a.rounds} interleaved rounds (requests/s)")
    print("throughput in requests/s; server CPU in ns per request (user+system, /proc)")
    print(f"{'':8} {'':4} {'default':>10} {'restricted':>11} {'ratio':>6}"
          f" {'cpu default':>12} {'cpu restr.':>11} {'ratio':>6}")
    for s in ports:
        for t in ("get", "set"):
            d0 = statistics.median(figures[(s, False, t)])
            d1 = statistics.median(figures[(s, True, t)])
            c0 = statistics.median(cpu[(s, False, t)])
            c1 = statistics.median(cpu[(s, True, t)])
            print(f"{s:8} {t.upper():4} {d0:10.0f} {d1:11.0f} {d1 / d0:6.3f}"
                  f" {c0:12.0f} {c1:11.0f} {c1 / c0:6.3f}")


if __name__ == "__main__":
    main()
