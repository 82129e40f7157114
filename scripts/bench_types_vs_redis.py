#!/usr/bin/env python3
"""The data-type commands and the memory of small hashes, ferrokv beside redis-server.

  python3 scripts/bench_types_vs_redis.py [--rounds 5] [--requests 1000000]
      [--keyspace N] [--hashes 1000000]

Throughput: one redis-benchmark run per server and round with
`-t lpush,lpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset -c 50 -P 16`, the
command the data-types issue names (its SADD/HSET/ZADD then touch one
member; `--keyspace 1000000` adds `-r 1000000`, so the set, hash and sorted
set grow to ~630k members and the figures measure big collections, where
both servers wait on cache misses). The tests run in that order, so LPOP, SPOP and ZPOPMIN pop what the pushes
made), the servers in turns (ferrokv, redis, ferrokv, ...) and a FLUSHALL
between runs, so drifts in machine load hit both alike. Figures are medians
over rounds; the ratios are what to quote.

Memory: on freshly started servers, N hashes `user:<i>` of 10 small fields
(`field0`..`field9`, 8-byte values) loaded with redis-cli --pipe, then the
resident set size (and used_memory) of each process.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli, cpu_seconds, free_port, rss_bytes  # noqa: E402
from bench_vs_redis import start  # noqa: E402

TESTS = "lpush,lpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset"


def bench(port, pid, n, keyspace):
    """Each test in turn (so the pops find what the pushes made), with the
    server's CPU time per request: on a 2-core machine redis-benchmark can
    be the bottleneck, and CPU per request is then the figure that shows
    the server's own cost."""
    rand = ["-r", str(keyspace)] if keyspace else []
    res = {}
    for test in TESTS.split(","):
        c0 = cpu_seconds(pid)
        out = subprocess.run(
            ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(n)] + rand +
            ["-c", "50", "-P", "16", "-d", "32", "--csv"],
            capture_output=True, text=True, check=True).stdout
        c1 = cpu_seconds(pid)
        for line in out.splitlines()[1:]:
            cols = [c.strip('"') for c in line.split(",")]
            name = cols[0].split(" ")[0]
            if len(cols) > 1 and name == test.upper():
                # LRANGE_100 runs its LPUSH prefill too: CPU is per request of both.
                reqs = n * (2 if test == "lrange_100" else 1)
                res[name] = (float(cols[1]), (c1 - c0) / reqs * 1e6)
    return res


def load_hashes(port, n):
    chunk = 100_000
    for start_i in range(0, n, chunk):
        payload = bytearray()
        for i in range(start_i, min(n, start_i + chunk)):
            k = b"user:%07d" % i
            args = [b"HSET", k]
            for f in range(10):
                args += [b"field%d" % f, b"v%07d" % ((i * 10 + f) % 10_000_000)]
            payload += b"*%d\r\n" % len(args)
            for a in args:
                payload += b"$%d\r\n%s\r\n" % (len(a), a)
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=bytes(payload),
                       capture_output=True, check=True)


def used_memory(port):
    info = cli(port, "info", "memory")
    for line in info.splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--hashes", type=int, default=1_000_000)
    ap.add_argument("--keyspace", type=int, default=0)
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    a = ap.parse_args()
    if not os.path.exists(a.ferrokv):
        subprocess.run(["cargo", "build", "--release", "-p", "ferrokv-server"], cwd=ROOT, check=True)
    servers = {}
    fp, rp = free_port(), free_port()
    servers["ferrokv"] = (fp, start("ferrokv", [a.ferrokv], fp))
    servers["redis"] = (rp, start("redis", ["redis-server"], rp))
    results = {}
    try:
        for rnd in range(0 if a.skip_throughput else a.rounds):
            order = ["ferrokv", "redis"] if rnd % 2 == 0 else ["redis", "ferrokv"]
            for name in order:
                port, proc = servers[name]
                cli(port, "flushall")
                for test, r in bench(port, proc.pid, a.requests, a.keyspace).items():
                    results.setdefault((test, name), []).append(r)
                print(f"round {rnd} {name} done", file=sys.stderr)
        if results:
            rnd = f" -r {a.keyspace}" if a.keyspace else ""
            print(f"| test (-c 50 -P 16{rnd}) | ferrokv req/s | redis req/s | throughput ratio "
                  "| ferrokv CPU us/req | redis CPU us/req | CPU ratio |")
            print("|---|---|---|---|---|---|---|")
            for test in [t.upper() for t in TESTS.split(",")]:
                f, r = results.get((test, "ferrokv")), results.get((test, "redis"))
                if not f or not r:
                    continue
                frps, rrps = statistics.median(x[0] for x in f), statistics.median(x[0] for x in r)
                fus, rus = statistics.median(x[1] for x in f), statistics.median(x[1] for x in r)
                print(f"| {test} | {frps:,.0f} | {rrps:,.0f} | {frps / rrps:.2f}x "
                      f"| {fus:.3f} | {rus:.3f} | {fus / rus:.2f}x |")
        for name in list(servers):
            servers[name][1].kill()
            servers[name][1].wait()
        fp, rp = free_port(), free_port()
        servers["ferrokv"] = (fp, start("ferrokv", [a.ferrokv], fp))
        servers["redis"] = (rp, start("redis", ["redis-server"], rp))
        time.sleep(0.5)
        base = {name: rss_bytes(servers[name][1].pid) for name in servers}
        mem, used = {}, {}
        for name in ("ferrokv", "redis"):
            port, proc = servers[name]
            load_hashes(port, a.hashes)
            time.sleep(1)
            assert int(cli(port, "dbsize")) == a.hashes, cli(port, "dbsize")
            assert cli(port, "object", "encoding", "user:0000000") == "listpack"
            mem[name] = rss_bytes(proc.pid)
            used[name] = used_memory(port)
        print()
        print(f"| memory, {a.hashes:,} hashes x 10 fields | ferrokv | redis | ratio |")
        print("|---|---|---|---|")
        print(f"| RSS after load | {mem['ferrokv'] / 2**20:.1f} MiB | {mem['redis'] / 2**20:.1f} MiB "
              f"| {mem['ferrokv'] / mem['redis']:.2f}x |")
        fd, rd = mem["ferrokv"] - base["ferrokv"], mem["redis"] - base["redis"]
        print(f"| RSS growth from empty | {fd / 2**20:.1f} MiB | {rd / 2**20:.1f} MiB | {fd / rd:.2f}x |")
        print(f"| used_memory | {used['ferrokv'] / 2**20:.1f} MiB | {used['redis'] / 2**20:.1f} MiB "
              f"| {used['ferrokv'] / used['redis']:.2f}x |")
    finally:
        for _, p in servers.values():
            p.kill()


if __name__ == "__main__":
    main()
