#!/usr/bin/env python3
"""I/O threads (`io-threads N`, crates/net/src/io_threads.rs): ferrokv, Redis 7.0.15
and Valkey 8.0.1 side by side with 1, 2 and 4 I/O threads, in one run on
this machine (docs/benchmarks.md, "I/O threads").

  python3 scripts/bench_io_threads.py [--rounds 3] [--requests 200000]
      [--threads 1,2,4] [--peer-threads 1,2] [--conns 50,1000] [--pipelines 1,16]

Servers (each started once, fresh):
  ferrokv-tN        io-threads N, as shipped: the threads are used only
                    when a batch is large enough and a core is free of
                    other processes (io_threads_allowed);
  ferrokv-tN-forced io-threads N with events-per-io-thread 0: every batch
                    goes to the threads, whatever the machine;
  redis-tN          Debian's redis-server 7.0.15, io-threads N,
                    io-threads-do-reads yes;
  valkey-tN         ../shared/peers/valkey-8.0.1/valkey-server, io-threads N.

redis-benchmark drives them in turns within each round (the order rotates
each round), so drifts in machine load hit all alike; figures are medians
over rounds. For each test: throughput, the whole process's CPU µs per
request, the execution (main) thread's CPU µs per request (from
/proc/PID/task/PID/stat: the figure that bounds what more I/O threads can
give, 1 / it being the ceiling), and p99 latency.
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpu_seconds, free_port, start_server  # noqa: E402

DIRS = []
VALKEY = os.path.join(ROOT, "..", "shared", "peers", "valkey-8.0.1", "valkey-server")


def run_benchmark(port, pid, test, clients, pipeline, n, keyspace, size=32):
    """(req/s, process CPU µs/req, main-thread CPU µs/req, p99 ms)."""
    c0, m0 = cpu_seconds(pid), cpu_seconds(pid, pid)
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(n), "-r", str(keyspace),
         "-c", str(clients), "-P", str(pipeline), "-d", str(size), "--csv"],
        capture_output=True, text=True, check=True).stdout
    c1, m1 = cpu_seconds(pid), cpu_seconds(pid, pid)
    line = [l for l in out.splitlines() if l.startswith('"' + test.upper())][0]
    f = [x.strip('"') for x in line.split(",")]
    return float(f[1]), (c1 - c0) / n * 1e6, (m1 - m0) / n * 1e6, float(f[6])


def servers_for(a):
    out = []
    for t in a.threads:
        out.append((f"ferrokv-t{t}", [a.ferrokv, "--io-threads", str(t), "--io-threads-do-reads", "yes"]))
        if t > 1 and a.forced:
            out.append((f"ferrokv-t{t}-forced", [a.ferrokv, "--io-threads", str(t),
                                                 "--io-threads-do-reads", "yes",
                                                 "--events-per-io-thread", "0"]))
        if a.redis and t in a.peer_threads:
            out.append((f"redis-t{t}", ["redis-server", "--io-threads", str(t),
                                        "--io-threads-do-reads", "yes"]))
        if a.valkey and t in a.peer_threads and os.path.exists(VALKEY):
            out.append((f"valkey-t{t}", [VALKEY, "--io-threads", str(t)]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--peer-threads", default=None,
                    help="thread counts for Redis and Valkey (default: --threads); their I/O "
                         "threads spin, so with more threads than cores a run takes minutes")
    ap.add_argument("--conns", default="50,1000")
    ap.add_argument("--pipelines", default="1,16")
    ap.add_argument("--tests", default="set,get")
    ap.add_argument("--no-redis", dest="redis", action="store_false")
    ap.add_argument("--no-valkey", dest="valkey", action="store_false")
    ap.add_argument("--no-forced", dest="forced", action="store_false")
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    a = ap.parse_args()
    a.threads = [int(t) for t in a.threads.split(",")]
    a.peer_threads = [int(t) for t in (a.peer_threads or ",".join(map(str, a.threads))).split(",")]
    if not os.path.exists(a.ferrokv):
        subprocess.run(["cargo", "build", "--release", "-p", "ferrokv-server"], cwd=ROOT, check=True)
    if a.valkey and not os.path.exists(VALKEY):
        print(f"valkey is not at {VALKEY}: its rows are skipped", file=sys.stderr)
    servers = {}
    extra = ["--save", "", "--appendonly", "no", "--maxclients", "4096"]
    try:
        for name, argv in servers_for(a):
            port = free_port()
            servers[name] = (port, start_server(name, argv + extra, port, DIRS))
        conns = [int(c) for c in a.conns.split(",")]
        pipes = [int(p) for p in a.pipelines.split(",")]
        tests = [(c, p, t) for c in conns for p in pipes for t in a.tests.split(",")]
        results = {}
        names = list(servers)
        for rnd in range(a.rounds):
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for (clients, pipeline, test) in tests:
                n = a.requests * (4 if pipeline > 1 else 1)
                for name in order:
                    port, proc = servers[name]
                    r = run_benchmark(port, proc.pid, test, clients, pipeline, n, 100_000)
                    results.setdefault((clients, pipeline, test, name), []).append(r)
                    print(f"round {rnd} {test} -c {clients} -P {pipeline} {name}: {r[0]:,.0f} req/s, "
                          f"{r[1]:.3f} us CPU/req, main thread {r[2]:.3f} us/req, p99 {r[3]:.3f} ms",
                          file=sys.stderr, flush=True)
        print("| test | server | req/s | vs ferrokv-t1 | process CPU us/req | main-thread CPU us/req "
              "| main-thread ceiling req/s | p99 ms |")
        print("|---|---|---|---|---|---|---|---|")
        for (clients, pipeline, test) in tests:
            med = {}
            for name in names:
                rows = results[(clients, pipeline, test, name)]
                med[name] = tuple(statistics.median(r[i] for r in rows) for i in range(4))
            base = med.get("ferrokv-t1", (0,))[0]
            for name in names:
                rps, cpu, main_cpu, p99 = med[name]
                ceiling = f"{1e6 / main_cpu:,.0f}" if main_cpu > 0 else "-"
                rel = f"{rps / base:.2f}x" if base else "-"
                print(f"| {test.upper()} -c {clients} -P {pipeline} | {name} | {rps:,.0f} | {rel} "
                      f"| {cpu:.3f} | {main_cpu:.3f} | {ceiling} | {p99:.3f} |")
        for name in names:
            port, proc = servers[name]
            if name.startswith("ferrokv"):
                info = subprocess.run(["redis-cli", "-p", str(port), "info", "threads"],
                                      capture_output=True, text=True).stdout
                allowed = [l for l in info.splitlines() if l.startswith(("io_threads_allowed",
                                                                          "io_threaded_batches"))]
                print(f"{name}: {', '.join(x.strip() for x in allowed)}", file=sys.stderr)
    finally:
        for _, p in servers.values():
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
