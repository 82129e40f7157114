#!/usr/bin/env python3
"""Memory of many small hashes, ferrokv beside Redis.

Loads N hashes `HSET user:<i> f0 <v> ... f9 <v>` (10 small fields each)
into a fresh ferrokv (release build) and a fresh redis-server, both with
the same `hash-max-listpack-entries` (128), and prints INFO `used_memory`
and the process RSS of each, before and after, with the per-key cost and
the ratio ferrokv / Redis.

Values: `--values long` (default) are 10-byte texts (`v000001234`),
`--values short` are 2-4 byte texts (`v7`, `v123`).

    cargo build --release -p ferrokv-server
    python3 scripts/bench_memory_hashes.py --keys 1000000

Loading goes through redis-py pipelines of 1000 commands.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, free_port, rss_bytes  # noqa: E402


def start(kind, port, tmp):
    if kind == "redis":
        args = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                "--dir", tmp, "--hash-max-listpack-entries", "128"]
    else:
        binary = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                              "release", "ferrokv-server")
        args = [binary, "--port", str(port), "--save", "", "--dir", tmp,
                "--hash-max-listpack-entries", "128"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    c = redis.Redis(port=port)
    for _ in range(200):
        try:
            c.ping()
            return p, c
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    raise RuntimeError(f"{kind} did not start")


def value(style, k, i):
    if style == "short":
        return b"v%d" % ((k * 7 + i) % 1000)
    return b"v%09d" % (k * 10 + i)


def load(c, n, style):
    pipe = c.pipeline(transaction=False)
    for k in range(n):
        mapping = {b"f%d" % i: value(style, k, i) for i in range(10)}
        pipe.hset(b"user:%d" % k, mapping=mapping)
        if k % 1000 == 999:
            pipe.execute()
    pipe.execute()


def measure(kind, n, style):
    tmp = tempfile.mkdtemp()
    port = free_port()
    p, c = start(kind, port, tmp)
    try:
        used0 = int(c.info("memory")["used_memory"])
        rss0 = rss_bytes(p.pid)
        t0 = time.time()
        load(c, n, style)
        secs = time.time() - t0
        assert c.dbsize() == n
        enc = c.object("encoding", "user:0")
        # Let both settle (ferrokv returns freed pages to the OS from its
        # cron; jemalloc purges dirty pages with a decay) before reading RSS.
        time.sleep(5)
        mem = c.info("memory")
        used = int(mem["used_memory"])
        rss = rss_bytes(p.pid)
        # ferrokv reports its keyspace table's own bytes (entries and
        # control bytes); the rest of used_memory is mostly the values.
        tables = int(mem.get("used_memory_dataset_tables", 0))
        return {"used": used, "tables": tables, "used0": used0, "rss": rss, "rss0": rss0, "secs": secs,
                "encoding": enc.decode() if isinstance(enc, bytes) else enc}
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--values", choices=["long", "short"], default="long")
    a = ap.parse_args()
    res = {k: measure(k, a.keys, a.values) for k in ("ferrokv", "redis")}
    mb = 1024 * 1024
    print(f"{a.keys} hashes x 10 fields, {a.values} values")
    print(f"{'server':8} {'encoding':9} {'used_memory':>12} {'B/key':>7} {'RSS':>10} {'B/key':>7} {'load s':>7}")
    for k, r in res.items():
        print(f"{k:8} {r['encoding']:9} {r['used'] / mb:10.1f}MB {(r['used'] - r['used0']) / a.keys:7.1f} "
              f"{r['rss'] / mb:8.1f}MB {(r['rss'] - r['rss0']) / a.keys:7.1f} {r['secs']:7.1f}")
    f, r = res["ferrokv"], res["redis"]
    if f["tables"]:
        print(f"ferrokv keyspace table: {f['tables'] / a.keys:.1f} B/key; values and the rest: "
              f"{(f['used'] - f['used0'] - f['tables']) / a.keys:.1f} B/key")
    print(f"ratio ferrokv/redis: used_memory {f['used'] / r['used']:.2f}x, RSS {f['rss'] / r['rss']:.2f}x")


if __name__ == "__main__":
    main()
