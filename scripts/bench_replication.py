#!/usr/bin/env python3
"""Replication figures of ferrokv-server beside redis-server.

  python3 scripts/bench_replication.py [--keys 1000000] [--value-size 1000]
      [--sync-only] [--runs N] [--diskless-load disabled|on-empty-db|swapdb]

1. Full sync time: a master holding keys x value-size bytes (1 GB by
   default, random values) gets a fresh replica of its own kind; the time
   from REPLICAOF to the replica serving the whole data set (link up and
   DBSIZE equal, polled every 2 ms over one connection). Both masters
   diskless with repl-diskless-sync-delay 0 (Redis at its best setting),
   rdbcompression yes on both sides; both replicas use the same
   repl-diskless-load (default disabled: write the payload to disk, then
   load, Redis's default). With --runs N each server syncs N fresh
   replicas, the two kinds taking turns (the machine's load shifts
   alike for both), and the medians are compared.
2. Master SET throughput (redis-benchmark -c 50 -P 16, random keys) with
   no replica and with one online replica, for both servers (skipped with
   --sync-only).
"""
import argparse
import os
import shutil
import socket
import statistics
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


class Conn:
    """One RESP connection for polling (no process spawned per poll)."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        line = self.f.readline()
        kind, rest = line[:1], line[1:].strip()
        if kind == b"$":
            n = int(rest)
            return b"" if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b":":
            return int(rest)
        return rest

    def close(self):
        self.f.close()
        self.s.close()


def full_sync_secs(master, replica, keys):
    c = Conn(replica.port)
    try:
        t0 = time.monotonic()
        c.cmd("replicaof", "127.0.0.1", str(master.port))
        while True:
            info = c.cmd("info", "replication")
            if b"master_link_status:up" in info and c.cmd("dbsize") == keys:
                return time.monotonic() - t0
            time.sleep(0.002)
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=1000)
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    ap.add_argument("--sync-only", action="store_true", help="only the full-sync part")
    ap.add_argument("--runs", type=int, default=1, help="full syncs per server (medians)")
    ap.add_argument("--diskless-load", default="disabled",
                    choices=["disabled", "on-empty-db", "swapdb"],
                    help="repl-diskless-load of both replicas")
    a = ap.parse_args()
    common = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
              "--rdbcompression", "yes"]
    if a.diskless_load != "disabled":
        # (Only when not the default: older builds lack the option.)
        common += ["--repl-diskless-load", a.diskless_load]
    kinds = {"ferrokv": a.ferrokv, "redis": "redis-server"}
    extra = {n: common + (["--appendonly", "no"] if n == "redis" else []) for n in kinds}
    masters = {n: Server(n, b, tempfile.mkdtemp(prefix=f"rbench-{n}-m-"), extra[n])
               for n, b in kinds.items()}
    rows = []
    rps0 = {}
    times = {n: [] for n in kinds}
    last = {}
    try:
        for name, m in masters.items():
            m.start()
            if not a.sync_only:
                rps0[name], _ = bench(m.port, "set", 1_000_000, 16, a.value_size, a.keys)
                cli(m.port, "flushall")
            load_data(m.port, a.keys, a.value_size)
            assert int(cli(m.port, "dbsize")) == a.keys
        for i in range(a.runs):
            for name, binary in kinds.items():
                r = Server(name, binary, tempfile.mkdtemp(prefix=f"rbench-{name}-r-"), extra[name])
                r.start()
                try:
                    times[name].append(full_sync_secs(masters[name], r, a.keys))
                finally:
                    if i == a.runs - 1 and not a.sync_only:
                        last[name] = r
                    else:
                        r.stop()
                        # A replica's data dir holds a copy of the data set.
                        shutil.rmtree(r.dir, ignore_errors=True)
                print(f"{name}: sync {times[name][-1]:.2f} s", file=sys.stderr)
        sync = {n: statistics.median(t) for n, t in times.items()}
        for name in kinds:
            runs = ", ".join(f"{t:.2f}" for t in times[name])
            label = f"full sync {a.keys} x {a.value_size} B ({name})"
            rows.append((label, f"{sync[name]:.2f} s" + (f" (median of {runs})" if a.runs > 1 else "")))
        if not a.sync_only:
            for name, m in masters.items():
                rps1, _ = bench(m.port, "set", 1_000_000, 16, a.value_size, a.keys)
                rows.append((f"master SET rps, no replica ({name})", f"{rps0[name]:.0f}"))
                rows.append((f"master SET rps, one replica ({name})", f"{rps1:.0f}"))
                rows.append((f"with/without replica ({name})", f"{rps1 / rps0[name]:.2f}x"))
                print(f"{name}: SET {rps0[name]:.0f} -> {rps1:.0f}", file=sys.stderr)
    finally:
        for s in list(masters.values()) + list(last.values()):
            s.stop()
            shutil.rmtree(s.dir, ignore_errors=True)
    rows.append(("full sync time ratio ferrokv/redis", f"{sync['ferrokv'] / sync['redis']:.2f}x"))
    print(f"repl-diskless-load {a.diskless_load}")
    print("| measure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
