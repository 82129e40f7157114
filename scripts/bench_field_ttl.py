#!/usr/bin/env python3
"""Hash-field TTLs (Redis 7.4's HEXPIRE family), ferrokv beside Redis 7.4.1.

For each server, started fresh:
- memory per field TTL: 100,000 fields in 1,000 small hashes (listpackex)
  and in one large hash (hashtable); INFO used_memory before and after
  HPEXPIREAT on every field, divided by the fields;
- the active cycle: 1,000,000 fields of one hash due at the same
  millisecond; the time until the hash is gone (or until --watch seconds,
  whichever first), the fields removed, and the longest PING meanwhile.

    cargo build --release -p ferrokv-server
    python3 scripts/bench_field_ttl.py [--rounds 3] [--watch 30]

Redis 7.4.1 is ../shared/peers/redis-7.4.1/redis-server (skipped with a
printed line where this clone has none). Medians of --rounds runs.
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
from benchlib import ROOT, free_port  # noqa: E402

PEER = os.path.join(ROOT, "..", "shared", "peers", "redis-7.4.1", "redis-server")
FAR = 4102444800000


def start(kind, port, tmp):
    if kind == "redis-7.4.1":
        args = [PEER, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", tmp]
    else:
        target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
        args = [os.path.join(target, "release", "ferrokv-server"), "--port", str(port),
                "--save", "", "--dir", tmp]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            c = Conn(port)
            if c.cmd("PING") == b"PONG":
                return p, c
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{kind} did not start")


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.settimeout(120)
        self.f = self.s.makefile("rb")

    @staticmethod
    def enc(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def read(self):
        line = self.f.readline()
        t = line[:1]
        if t == b"$":
            n = int(line[1:-2])
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            return [self.read() for _ in range(int(line[1:-2]))]
        if t == b":":
            return int(line[1:-2])
        return line[1:-2]

    def cmd(self, *args):
        self.s.sendall(self.enc(args))
        return self.read()

    def pipeline(self, cmds):
        self.s.sendall(b"".join(self.enc(c) for c in cmds))
        return [self.read() for _ in cmds]

    def info(self, section, field):
        text = self.cmd("INFO", section).decode()
        for line in text.split("\r\n"):
            if line.startswith(field + ":"):
                return int(line.split(":")[1])
        return 0


def memory_per_ttl(c, per_hash, fields=100_000):
    c.cmd("FLUSHALL")
    hashes = fields // per_hash
    for h in range(hashes):
        for b in range(0, per_hash, 1000):
            args = ["HSET", f"h{h}"]
            for i in range(b, min(per_hash, b + 1000)):
                args += [f"f{i}", "v"]
            c.cmd(*args)
    before = c.info("memory", "used_memory")
    for h in range(hashes):
        for b in range(0, per_hash, 10_000):
            names = [f"f{i}" for i in range(b, min(per_hash, b + 10_000))]
            c.cmd("HPEXPIREAT", f"h{h}", FAR + b, "FIELDS", len(names), *names)
    return (c.info("memory", "used_memory") - before) / fields


def active_cycle(c, watch, fields=1_000_000):
    c.cmd("FLUSHALL")
    for b in range(0, fields, 50_000):
        c.pipeline([["HSET", "big"] + sum(([f"f{i}", "v"] for i in range(k, k + 1000)), [])
                    for k in range(b, b + 50_000, 1000)])
    removed0 = c.info("stats", "expired_subkeys")
    due = int(time.time() * 1000) + 5000
    for b in range(0, fields, 10_000):
        names = [f"f{i}" for i in range(b, b + 10_000)]
        c.cmd("HPEXPIREAT", "big", due, "FIELDS", len(names), *names)
    while time.time() * 1000 < due:
        time.sleep(0.01)
    t0 = time.time()
    longest = 0.0
    while time.time() - t0 < watch:
        t = time.time()
        c.cmd("PING")
        longest = max(longest, time.time() - t)
        if c.cmd("EXISTS", "big") == 0:
            break
        time.sleep(0.005)
    return (time.time() - t0, c.info("stats", "expired_subkeys") - removed0, longest)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--watch", type=float, default=30.0)
    a = ap.parse_args()
    kinds = ["ferrokv"]
    if os.path.exists(PEER):
        kinds.append("redis-7.4.1")
    else:
        print(f"redis-7.4.1 skipped: no {PEER}")
    results = {k: {"lp": [], "ht": [], "secs": [], "removed": [], "ping": []} for k in kinds}
    for _ in range(a.rounds):
        for kind in kinds:
            with tempfile.TemporaryDirectory() as tmp:
                p, c = start(kind, free_port(), tmp)
                try:
                    r = results[kind]
                    r["lp"].append(memory_per_ttl(c, 100))
                    r["ht"].append(memory_per_ttl(c, 100_000))
                    secs, removed, ping = active_cycle(c, a.watch)
                    r["secs"].append(secs)
                    r["removed"].append(removed)
                    r["ping"].append(ping)
                finally:
                    p.kill()
                    p.wait()
    print(f"{'server':<12} {'B/TTL listpackex':>17} {'B/TTL hashtable':>16} "
          f"{'1M due: secs':>13} {'removed':>9} {'fields/s':>10} {'max PING ms':>12}")
    for kind in kinds:
        r = results[kind]
        med = {k: statistics.median(v) for k, v in r.items()}
        print(f"{kind:<12} {med['lp']:>17.1f} {med['ht']:>16.1f} {med['secs']:>13.2f} "
              f"{int(med['removed']):>9} {med['removed'] / med['secs']:>10.0f} "
              f"{med['ping'] * 1000:>12.1f}")


if __name__ == "__main__":
    main()
