#!/usr/bin/env python3
"""Replication figures of ferrokv-server beside redis-server, one run.

  python3 scripts/bench_replication.py [--keys 1000000] [--value-size 1000]

1. Full sync time: a master holding keys x value-size bytes (1 GB by
   default, random values) gets a fresh replica of its own kind; the time
   from REPLICAOF to the replica serving the whole data set (link up and
   DBSIZE equal). Both masters diskless with repl-diskless-sync-delay 0
   (Redis at its best setting), rdbcompression yes on both sides.
2. Master SET throughput (redis-benchmark -c 50 -P 16, random keys) with
   no replica and with one online replica, for both servers.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli  # noqa: E402
from bench_persistence import Server, bench, load_data  # noqa: E402


def field(port, section, name):
    for line in cli(port, "info", section).splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def full_sync_secs(master, replica, keys):
    t0 = time.monotonic()
    cli(replica.port, "replicaof", "127.0.0.1", str(master.port))
    while True:
        if field(replica.port, "replication", "master_link_status") == "up":
            if int(cli(replica.port, "dbsize") or 0) == keys:
                return time.monotonic() - t0
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=1000)
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    a = ap.parse_args()
    common = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
              "--rdbcompression", "yes"]
    kinds = {"ferrokv": a.ferrokv, "redis": "redis-server"}
    rows = []
    sync = {}
    for name, binary in kinds.items():
        extra = common + (["--appendonly", "no"] if name == "redis" else [])
        m = Server(name, binary, tempfile.mkdtemp(prefix=f"rbench-{name}-m-"), extra)
        r = Server(name, binary, tempfile.mkdtemp(prefix=f"rbench-{name}-r-"), extra)
        try:
            m.start()
            rps0, _ = bench(m.port, "set", 1_000_000, 16, a.value_size, a.keys)
            cli(m.port, "flushall")
            load_data(m.port, a.keys, a.value_size)
            assert int(cli(m.port, "dbsize")) == a.keys
            r.start()
            sync[name] = full_sync_secs(m, r, a.keys)
            rows.append((f"full sync {a.keys} x {a.value_size} B ({name})", f"{sync[name]:.2f} s"))
            rps1, _ = bench(m.port, "set", 1_000_000, 16, a.value_size, a.keys)
            rows.append((f"master SET rps, no replica ({name})", f"{rps0:.0f}"))
            rows.append((f"master SET rps, one replica ({name})", f"{rps1:.0f}"))
            rows.append((f"with/without replica ({name})", f"{rps1 / rps0:.2f}x"))
            print(f"{name}: sync {sync[name]:.2f} s, SET {rps0:.0f} -> {rps1:.0f}", file=sys.stderr)
        finally:
            m.stop()
            r.stop()
    rows.append(("full sync time ratio ferrokv/redis", f"{sync['ferrokv'] / sync['redis']:.2f}x"))
    print("| measure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
