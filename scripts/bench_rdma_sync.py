#!/usr/bin/env python3
"""Full sync of one data set over RDMA (libfabric tcp provider) beside
ferrokv's own TCP sync and a Redis -> Redis sync, one run (docs/rdma.md,
docs/benchmarks.md).

    python3 scripts/bench_rdma_sync.py [--bin target/release/ferrokv-server]
        [--mib 1024] [--runs 3] [--memory-mib 256,1024]
        [--sweep-mib 256] [--slots 4,8,16] [--chunks 512kb,2mb,8mb]

Data: incompressible 64 MiB values (the snapshot is as large as the data).

1. Sync time, per run and mode, from REPLICAOF to the replica serving the
   whole data set (link up and DBSIZE equal, polled every 5 ms):
   - ferrokv RDMA: disk-based snapshot, +RDMAFULLSYNC, one-sided writes;
   - ferrokv TCP: the same master, disk-based snapshot sent over the link;
   - Redis -> Redis: redis-server master and replica holding the same
     values, `repl-diskless-sync yes`, `repl-diskless-sync-delay 0` (its
     best setting), rdbcompression yes on every server.
   Beside it, from the logs: the master's save, its offer (CRC64) and the
   transfer's first write to last credit; and the master's CPU seconds
   over the whole sync (/proc, user + system).
2. The replica's extra memory during an RDMA sync at two snapshot sizes.
   The replica loads the snapshot while it arrives, so its memory grows
   by the data itself during the transfer; what the sync adds beyond the
   data is its peak anonymous RSS (heap, ring) sampled every 5 ms from
   REPLICAOF to serving, minus its anonymous RSS before REPLICAOF (an
   empty replica), minus the data loaded (`used_memory` after the sync
   minus before).
3. A K x C sweep (replica `rdma-ring-slots` x `rdma-chunk-size`): transfer
   time and rate from the master's log.

Loopback only: the tcp provider is TCP underneath, so this compares code
paths on this machine, not RDMA hardware.
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, rss_parts  # noqa: E402

VALUE = 64 << 20


def cpu_seconds(pid):
    """User + system CPU of a process, its threads and its reaped children
    (Redis's forked saver is counted once it has exited)."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in rest[11:15]) / os.sysconf("SC_CLK_TCK")


def cmd(port, *args):
    s = socket.create_connection(("127.0.0.1", port))
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    s.close()
    return data.decode(errors="replace")


def info_field(port, section, name):
    for line in cmd(port, "INFO", section).splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return ""


class Proc:
    def __init__(self, binary, d, extra):
        self.dir = d
        self.port = free_port()
        self.log = os.path.join(d, "server.log")
        f = open(self.log, "w")
        self.p = subprocess.Popen([binary, "--port", str(self.port), "--dir", d, "--save", ""] + extra,
                                  stdout=f, stderr=f)
        for _ in range(1000):
            try:
                if cmd(self.port, "PING").startswith("+PONG"):
                    return
            except OSError:
                time.sleep(0.01)
        sys.exit(f"{binary} on {self.port} did not start")

    def lines(self):
        return open(self.log).read().splitlines()

    def stop(self):
        self.p.kill()
        self.p.wait()


def fill(port, mib, seed_values):
    for i in range(mib // 64):
        s = socket.create_connection(("127.0.0.1", port))
        v = seed_values[i]
        k = b"v%d" % i
        s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n" % (len(k), k, len(v)) + v + b"\r\n")
        s.recv(16)
        s.close()


def sync(master, replica, keys, sample_rss=False):
    """REPLICAOF -> link up with all keys. Returns (secs, master CPU s,
    extra memory or None): the peak anonymous RSS of the replica during
    the sync beyond its anonymous RSS before and the data loaded, sampled
    every 5 ms."""
    anon0, _ = rss_parts(replica.p.pid)
    used0 = int(info_field(replica.port, "memory", "used_memory") or 0)
    cpu0 = cpu_seconds(master.p.pid)
    peak = [0]
    done = threading.Event()

    def sampler():
        while not done.is_set():
            try:
                anon, _ = rss_parts(replica.p.pid)
                peak[0] = max(peak[0], anon)
            except OSError:
                pass
            time.sleep(0.005)

    t = threading.Thread(target=sampler)
    if sample_rss:
        t.start()
    t0 = time.monotonic()
    cmd(replica.port, "REPLICAOF", "127.0.0.1", master.port)
    while True:
        try:
            if info_field(replica.port, "replication", "master_link_status") == "up":
                if int(cmd(replica.port, "DBSIZE")[1:].strip() or 0) == keys:
                    secs = time.monotonic() - t0
                    replica.serving_at = time.time()
                    break
        except OSError as e:
            # Logged, not fatal: a refused poll is retried.
            print(f"(poll of {replica.port}: {e})", file=sys.stderr)
        time.sleep(0.005)
    cpu = cpu_seconds(master.p.pid) - cpu0
    done.set()
    if sample_rss:
        t.join()
    if not sample_rss or not peak[0]:
        return secs, cpu, None
    loaded = int(info_field(replica.port, "memory", "used_memory") or 0) - used0
    return secs, cpu, peak[0] - anon0 - loaded


def after(lines, mark, needle):
    hits = [l for l in lines[mark:] if needle in l]
    return hits[-1] if hits else ""


def log_time(line):
    m = re.search(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
    return datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc).timestamp() if m else None


def log_figures(master, mark, replica=None):
    """The save's duration, the RDMA transfer (secs, MB/s) and the time
    from the end of the save to the replica serving (wall clocks)."""
    lines = master.lines()
    saved = after(lines, mark, "DB saved on disk")
    m = re.search(r"bytes, ([\d.]+) s\)", saved)
    save = float(m.group(1)) if m else None
    done = after(lines, mark, "RDMA transfer to replica")
    m = re.search(r"in ([\d.]+)s \(([\d.]+) MB/s", done)
    tr = (float(m.group(1)), float(m.group(2))) if m else None
    post = None
    if replica is not None and saved and log_time(saved):
        post = replica.serving_at - log_time(saved)
    return save, tr, post


def first_touch_rate(root, settle, block):
    """MB/s of writing a new 256 MiB file in `block`-byte writes after
    `settle` seconds. On this VM (Linux 6.18, ext4, memory returned to the
    host by free page reporting) the size of a buffered write decides the
    size of the page-cache folios allocated for it, and large ones are
    slow to get: ~335 MB/s with 2-4 MiB writes against 3.8-5.6 GB/s with
    64-512 KiB most of the time (ferrokv writes files in pieces of at most
    256 KiB, `persistence/writeback.rs`) — but the VM has slow periods
    where small writes drop to ~340 MB/s too, and every run inside one is
    2-3x slower: the probe says which kind of period the run met. Every
    sync below starts after the same settling, so no mode runs on memory a
    previous run just freed."""
    time.sleep(settle)
    path = os.path.join(root, "first-touch")
    buf = os.urandom(block)
    t0 = time.monotonic()
    with open(path, "wb", buffering=0) as f:
        for _ in range((256 << 20) // block):
            f.write(buf)
    secs = time.monotonic() - t0
    os.remove(path)
    return 256 * 2**20 / secs / 1e6


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/ferrokv-server")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--memory-mib", default="256,1024")
    ap.add_argument("--sweep-mib", type=int, default=256)
    ap.add_argument("--slots", default="4,8,16")
    ap.add_argument("--chunks", default="512kb,2mb,8mb")
    ap.add_argument("--skip-redis", action="store_true")
    ap.add_argument("--tcp-replica-args", default="",
                    help="extra arguments of the ferrokv TCP replica, e.g. '--repl-diskless-load swapdb'")
    ap.add_argument("--master-args", default="", help="extra arguments of the ferrokv master")
    ap.add_argument("--settle", type=float, default=6.0,
                    help="seconds to wait before each sync (see first_touch_rate)")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench-rdma-")
    memory_mibs = [int(x) for x in a.memory_mib.split(",") if x]
    rng_values = [os.urandom(VALUE) for _ in range(max(a.mib, a.sweep_mib, *memory_mibs) // 64)]
    procs = []

    def start(binary, name, extra):
        d = os.path.join(root, name)
        os.mkdir(d)
        p = Proc(binary, d, extra)
        procs.append(p)
        return p

    def kill(p):
        p.stop()
        if not os.environ.get("KEEP_BENCH_DIR"):
            shutil.rmtree(p.dir, ignore_errors=True)

    try:
        # 1. Sync times.
        keys = a.mib // 64
        fmaster = start(a.bin, "fmaster", ["--rdma-bind", "127.0.0.1", "--rdma-port", "0",
                                           "--repl-diskless-sync", "no"] + a.master_args.split())
        fill(fmaster.port, a.mib, rng_values)
        rmaster = None
        if not a.skip_redis:
            rmaster = start("redis-server", "rmaster", ["--repl-diskless-sync", "yes",
                                                        "--repl-diskless-sync-delay", "0",
                                                        "--appendonly", "no"])
            fill(rmaster.port, a.mib, rng_values)
        print(f"## Sync of {a.mib} MiB ({keys} incompressible 64 MiB values), REPLICAOF -> serving\n")
        print("| run | mode | sync s | master save s | save end -> serving s | RDMA transfer s (MB/s) | master CPU s |")
        print("|---|---|---|---|---|---|---|")
        res = {"rdma": [], "tcp": [], "redis": []}
        post = {"rdma": [], "tcp": []}
        cpu = {"rdma": [], "tcp": [], "redis": []}
        print(f"new-file write rate after {a.settle:.0f} s of settling: "
              f"{first_touch_rate(root, a.settle, 64 << 10):.0f} MB/s in 64 KiB writes, "
              f"{first_touch_rate(root, a.settle, 256 << 10):.0f} MB/s in 256 KiB writes, "
              f"{first_touch_rate(root, a.settle, 4 << 20):.0f} MB/s in 4 MiB writes\n")
        for run in range(1, a.runs + 1):
            modes = ["rdma", "tcp", "redis"]
            for mode in modes[run - 1:] + modes[:run - 1]:
                time.sleep(a.settle)
                if mode == "redis" and rmaster is None:
                    continue
                if mode == "redis":
                    r = start("redis-server", f"redis{run}", ["--repl-diskless-sync-delay", "0",
                                                              "--appendonly", "no"])
                    secs, c, _ = sync(rmaster, r, keys)
                    print(f"| {run} | Redis -> Redis (diskless) | {secs:.2f} | — | — | — | {c:.2f} |")
                else:
                    extra = ["--replica-rdma", "yes"] if mode == "rdma" else a.tcp_replica_args.split()
                    r = start(a.bin, f"{mode}{run}", extra)
                    mark = len(fmaster.lines())
                    secs, c, _ = sync(fmaster, r, keys)
                    save, tr, after_save = log_figures(fmaster, mark, r)
                    post[mode].append(after_save)
                    trs = f"{tr[0]:.2f} ({tr[1]:.0f})" if tr else "—"
                    label = ("ferrokv RDMA (tcp provider)" if mode == "rdma"
                             else f"ferrokv TCP (disk-based) {a.tcp_replica_args}".strip())
                    print(f"| {run} | {label} | {secs:.2f} | {save:.2f} | {after_save:.2f} | {trs} | {c:.2f} |")
                res[mode].append(secs)
                cpu[mode].append(c)
                kill(r)
        print()
        print(f"medians: RDMA {med(res['rdma']):.2f} s, ferrokv TCP {med(res['tcp']):.2f} s"
              + (f", Redis {med(res['redis']):.2f} s" if res["redis"] else ""))
        print(f"RDMA / ferrokv TCP = {med(res['rdma']) / med(res['tcp']):.2f}x whole sync, "
              f"{med(post['rdma']) / med(post['tcp']):.2f}x from the end of the save "
              f"({med(post['rdma']):.2f} s / {med(post['tcp']):.2f} s) (target <= 1.0x)")
        if res["redis"]:
            print(f"RDMA / Redis = {med(res['rdma']) / med(res['redis']):.2f}x (target <= 0.6x)")
            print(f"master CPU s (median): RDMA {med(cpu['rdma']):.2f}, ferrokv TCP {med(cpu['tcp']):.2f}, "
                  f"Redis {med(cpu['redis']):.2f} (with its forked child)")
        kill(fmaster)
        if rmaster:
            kill(rmaster)

        # 2. Replica extra memory at two sizes (--memory-mib '' skips it).
        if not memory_mibs:
            return
        print("\n## Replica memory during the RDMA sync (K = 8, C = 2 MiB)\n")
        print("| snapshot MiB | peak anonymous RSS beyond the loaded data MiB |")
        print("|---|---|")
        for mib in memory_mibs:
            m = start(a.bin, f"mem-m{mib}", ["--rdma-bind", "127.0.0.1", "--rdma-port", "0",
                                            "--repl-diskless-sync", "no"])
            fill(m.port, mib, rng_values)
            r = start(a.bin, f"mem-r{mib}", ["--replica-rdma", "yes"])
            _, _, extra = sync(m, r, mib // 64, sample_rss=True)
            if extra is None:
                print(f"| {mib} | not sampled |")
            else:
                print(f"| {mib} | {extra / 2**20:.1f} |")
            kill(r)
            kill(m)

        # 3. K x C sweep (--sweep-mib 0 skips it).
        if not a.sweep_mib:
            return
        print(f"\n## K x C sweep, {a.sweep_mib} MiB, transfer first write -> last credit\n")
        print("| K slots | C | transfer s | MB/s | sync s |")
        print("|---|---|---|---|---|")
        m = start(a.bin, "sweep-m", ["--rdma-bind", "127.0.0.1", "--rdma-port", "0",
                                     "--repl-diskless-sync", "no"])
        fill(m.port, a.sweep_mib, rng_values)
        for k in a.slots.split(","):
            for c in a.chunks.split(","):
                r = start(a.bin, f"sweep-{k}-{c}", ["--replica-rdma", "yes", "--rdma-ring-slots", k,
                                                    "--rdma-chunk-size", c])
                mark = len(m.lines())
                secs, _, _ = sync(m, r, a.sweep_mib // 64)
                _, tr, _ = log_figures(m, mark)
                if tr:
                    print(f"| {k} | {c} | {tr[0]:.3f} | {tr[1]:.0f} | {secs:.2f} |")
                else:
                    print(f"| {k} | {c} | not over RDMA | — | {secs:.2f} |")
                kill(r)
        kill(m)
    finally:
        for p in procs:
            if p.p.poll() is None:
                p.stop()
        if os.environ.get("KEEP_BENCH_DIR"):
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
