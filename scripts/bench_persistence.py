#!/usr/bin/env python3
"""Persistence figures of ferrokv-server beside redis-server, one run.

  python3 scripts/bench_persistence.py [--keys 1000000] [--value-size 1000]
      [--parts load,bgsave,aof] [--servers ferrokv,redis] [--bgsave-requests 2000000]

1. Snapshot load time: both servers hold the same data set (keys x value
   size, about 1 GB by default), SAVE it, and are restarted on their file;
   the time from process start to the first PONG (Redis answers -LOADING
   while it loads) is the load time.
2. BGSAVE under load: redis-benchmark (SET, -c 50, random keys over the
   data set) runs while BGSAVEs of the whole data set follow each other
   back to back for the whole benchmark (so that every request counted is
   served during a save, whatever each server's save takes); its p99
   latency, the duration of the saves that ended under load, and the
   saves' extra memory: for
   ferrokv the peak RSS growth sampled during the saves, for Redis its
   `rdb_last_cow_size` (the forked child's copy-on-write), the largest.
3. SET throughput with appendonly yes, appendfsync everysec and always
   (-c 50, -P 1 and -P 16).

EXTRA_ARGS (environment): extra arguments for the ferrokv server only, to
compare settings, e.g. EXTRA_ARGS="--bgsave-loop-share 5 --rdb-direct-io no".
"""
import argparse
import statistics
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli, cpu_seconds, free_port, rss_bytes  # noqa: E402


def info(port, field):
    for line in cli(port, "info", "persistence").splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return ""


class Server:
    def __init__(self, name, binary, d, extra):
        self.name, self.binary, self.dir, self.extra = name, binary, d, extra
        self.port = free_port()
        self.proc = None

    def start(self):
        args = [self.binary, "--port", str(self.port), "--dir", self.dir, "--save", ""] + self.extra + (os.environ.get("EXTRA_ARGS", "").split() if self.name == "ferrokv" else [])
        t0 = time.monotonic()
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return time.monotonic() - t0
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited")
            time.sleep(0.005)

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()


def load_data(port, keys, size, chunk=50_000):
    # Random values: the snapshot is as large as the data (LZF cannot
    # shrink them), as with real cached payloads.
    for start in range(0, keys, chunk):
        payload = bytearray()
        for i in range(start, min(keys, start + chunk)):
            val = os.urandom(size)
            k = b"key:%012d" % i
            payload += b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, size, val)
        subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=bytes(payload), capture_output=True, check=True)


def bench(port, test, n, pipeline, size, keys):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(n), "-r", str(keys),
         "-c", "50", "-P", str(pipeline), "-d", str(size), "--csv"],
        capture_output=True, text=True, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith('"' + test.upper())][0]
    f = [x.strip('"') for x in line.split(",")]
    return float(f[1]), float(f[6])  # rps, p99 ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-size", type=int, default=1000)
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    ap.add_argument("--parts", default="load,bgsave,aof",
                    help="which measurements to run (bgsave loads the data set without timing it)")
    ap.add_argument("--bgsave-requests", type=int, default=2_000_000)
    ap.add_argument("--servers", default="ferrokv,redis", help="servers for the load and bgsave parts")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    rows = []
    dirs = {n: tempfile.mkdtemp(prefix=f"pbench-{n}-") for n in ("ferrokv", "redis")}
    servers = {
        "ferrokv": Server("ferrokv", a.ferrokv, dirs["ferrokv"], []),
        "redis": Server("redis", "redis-server", dirs["redis"], ["--appendonly", "no"]),
    }
    servers = {k: v for k, v in servers.items() if k in a.servers.split(",")}
    try:
        # 1. load time
        for s in servers.values():
            if "load" not in parts:
                if "bgsave" in parts:
                    s.start()
                    load_data(s.port, a.keys, a.value_size)
                continue
            s.start()
            load_data(s.port, a.keys, a.value_size)
            assert int(cli(s.port, "dbsize")) == a.keys
            cli(s.port, "save")
            size = os.path.getsize(os.path.join(s.dir, "dump.rdb"))
            s.stop()
            t = s.start()
            assert int(cli(s.port, "dbsize")) == a.keys
            rows.append((f"load {size / 1e9:.2f} GB snapshot ({s.name})", f"{t:.2f} s"))
            print(f"{s.name}: load {t:.2f} s", file=sys.stderr)
        if "load" in parts and len(servers) == 2:
            fl = float(rows[0][1].split()[0]); rl = float(rows[1][1].split()[0])
            rows.append(("load time ratio ferrokv/redis", f"{fl / rl:.2f}x"))
        # 2. BGSAVE under a SET load
        # Long enough for several saves of each server to end under load.
        n = a.bgsave_requests
        for s in servers.values():
            if "bgsave" not in parts:
                break
            base_rss = rss_bytes(s.proc.pid)
            peak = [base_rss]
            done = threading.Event()

            def sample(pid=s.proc.pid):
                while not done.is_set():
                    peak[0] = max(peak[0], rss_bytes(pid))
                    time.sleep(0.02)
            th = threading.Thread(target=sample)
            th.start()
            res = {}
            cli(s.port, "bgsave")
            while info(s.port, "rdb_bgsave_in_progress") != "1":
                time.sleep(0.01)
            t0 = time.monotonic()
            bt = threading.Thread(target=lambda: res.update(r=bench(s.port, "set", n, 1, a.value_size, a.keys)))
            bt.start()
            # Every request counted is served during a save: BGSAVEs follow
            # each other until the benchmark ends. A save that ends while
            # the benchmark runs gives its duration under load.
            saves, cow, under_load, started = 1, 0, [], t0
            while bt.is_alive():
                if info(s.port, "rdb_bgsave_in_progress") == "0":
                    now = time.monotonic()
                    if bt.is_alive():
                        under_load.append(now - started)
                    if s.name == "redis":
                        cow = max(cow, int(info(s.port, "rdb_last_cow_size") or 0))
                    cli(s.port, "bgsave")
                    started = now
                    saves += 1
                time.sleep(0.02)
            while info(s.port, "rdb_bgsave_in_progress") == "1":
                time.sleep(0.05)
            if s.name == "redis":
                cow = max(cow, int(info(s.port, "rdb_last_cow_size") or 0))
            done.set()
            th.join()
            rps, p99 = res["r"]
            extra = (peak[0] - base_rss) if s.name == "ferrokv" else cow
            took = (f"{len(under_load)} ended under load, median {statistics.median(under_load):.1f} s"
                    if under_load else "none ended under load")
            rows.append((f"BGSAVE under SET -c 50 ({s.name})",
                         f"{saves} saves back to back ({took}), p99 {p99:.3f} ms, {rps:,.0f} req/s, extra memory {extra / 2**20:.0f} MiB"))
            print(rows[-1], file=sys.stderr)
        for s in servers.values():
            s.stop()
        # 3. AOF throughput
        turn = 0
        for policy in ("everysec", "always") if "aof" in parts else ():
            for pipeline in (1, 16):
                r = {}
                order = [("ferrokv", a.ferrokv), ("redis", "redis-server")]
                if turn % 2:
                    order.reverse()
                turn += 1
                for name, binary in order:
                    # Write back what earlier runs left in the page cache, so
                    # its I/O does not land on the next server's fsyncs.
                    os.sync()
                    d = tempfile.mkdtemp(prefix=f"aof-{name}-")
                    s = Server(name, binary, d, ["--appendonly", "yes", "--appendfsync", policy])
                    s.start()
                    r[name] = bench(s.port, "set", 200_000 if pipeline == 1 else 1_000_000, pipeline, 32, 1_000_000)[0]
                    s.stop()
                    shutil.rmtree(d, ignore_errors=True)
                rows.append((f"SET with appendfsync {policy}, -c 50 -P {pipeline}",
                             f"ferrokv {r['ferrokv']:,.0f} req/s, redis {r['redis']:,.0f} req/s, ratio {r['ferrokv'] / r['redis']:.2f}x"))
                print(rows[-1], file=sys.stderr)
    finally:
        for s in servers.values():
            s.stop()
        # The data directories hold gigabyte snapshots.
        for d in dirs.values():
            shutil.rmtree(d, ignore_errors=True)
    print("| measurement | result |")
    print("|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
