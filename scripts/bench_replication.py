#!/usr/bin/env python3
"""Replication figures of ferrokv-server beside redis-server.

  python3 scripts/bench_replication.py [--keys 1000000] [--value-size 1000]
      [--parts sync,throughput,lag,apply] [--sync-only] [--runs 5]
      [--diskless-load disabled|on-empty-db|swapdb] [--bench-keys 1000000]
      [--bench-n 2000000]

1. Full sync time (part `sync`): a master holding keys x value-size bytes
   (1 GB by default, random values) gets a fresh replica of its own kind;
   the time from REPLICAOF to the replica serving the whole data set (link
   up and DBSIZE equal, polled every 2 ms over one connection). Both
   masters diskless with repl-diskless-sync-delay 0 (Redis at its best
   setting), rdbcompression yes on both sides; both replicas use the same
   repl-diskless-load (default disabled: write the payload to disk, then
   load, Redis's default). Each server syncs `--runs` fresh replicas, the
   kinds taking turns, and the medians are compared. `--sync-only` is
   `--parts sync`.
2. Master SET throughput (part `throughput`): `redis-benchmark -t set -c 50
   -P 16 -r bench-keys -n bench-n` (3-byte values) against a master with one
   online replica and with none, `--runs` times each, alternating (the
   replica is detached with REPLICAOF NO ONE and attached again, waiting
   until it is online and caught up), ferrokv and Redis interleaved run by
   run, so that the load of a shared machine falls on both alike. Medians
   are reported with every run's figure.
3. Replication lag under write load (part `lag`): while the same
   redis-benchmark loads the master (with one online replica), a probe
   writes `SET lagprobe:<i> <monotonic ns>` on the master every
   `--probe-interval-ms`, and as soon as the reply arrives polls the
   replica on a separate connection with GET in a tight loop until the key
   holds that value. The lag is the time from the master's reply to the
   replica's first reply showing the key; p50/p90/p99/max are reported
   beside the round trip of one polling GET (the resolution of the measure:
   the key may have become visible just after the GET that missed it was
   answered) and the SET's own round trip on the master, with the share of
   probes whose key the first GET already saw (then the lag is one GET
   round trip: a long one means the replica, or the probe, waited for a
   CPU, not that the stream was behind). The probe is a fourth busy
   process on the machine. `--rdma-link` adds a ferrokv pair whose whole
   replication link runs over an RDMA connection (docs/rdma.md).
4. Replica apply cost (part `apply`): a fake master (this script) hands the
   replica an empty snapshot, then a stream of `--apply-n` SETs of 3-byte
   values over `--bench-keys` keys (after one SET of every key, so the
   table is full-size); the replica's CPU time (user + system, /proc) per
   applied command, with no benchmark client and no real master competing
   for the CPUs: the cleanest figure on a shared machine.
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli  # noqa: E402
from bench_persistence import Server, load_data  # noqa: E402


def stop(*servers):
    """Stops the servers and removes their directories (a replica keeps
    the snapshot it received there: hundreds of MB with --keys 1000000)."""
    for s in servers:
        s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)


def field(port, section, name):
    for line in cli(port, "info", section).splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return ""


class Conn:
    """A raw RESP connection: one command out, one reply in."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.reply()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.s.recv(65536)
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if line[:1] == b"-":
            raise RuntimeError(line.decode())
        return line

    def close(self):
        self.s.close()


def full_sync_secs(master, replica, keys):
    # One connection polled every 2 ms (no process spawned per poll).
    c = Conn(replica.port)
    try:
        t0 = time.monotonic()
        c.call("replicaof", "127.0.0.1", str(master.port))
        while True:
            info = c.call("info", "replication")
            if b"master_link_status:up" in info and int(c.call("dbsize")[1:]) == keys:
                return time.monotonic() - t0
            time.sleep(0.002)
    finally:
        c.close()


def attach(master, replica):
    """REPLICAOF, then waits until the link is up and the replica has
    applied everything the master wrote."""
    cli(replica.port, "replicaof", "127.0.0.1", str(master.port))
    caught_up(master, replica)


def caught_up(master, replica):
    while True:
        if field(replica.port, "replication", "master_link_status") == "up":
            moff = field(master.port, "replication", "master_repl_offset")
            if field(replica.port, "replication", "master_repl_offset") == moff:
                return
        time.sleep(0.02)


def detach(master, replica):
    cli(replica.port, "replicaof", "no", "one")
    while field(master.port, "replication", "connected_slaves") != "0":
        time.sleep(0.02)


def benchmark_cmd(port, keys, n):
    return ["redis-benchmark", "-p", str(port), "-t", "set", "-c", "50", "-P", "16",
            "-r", str(keys), "-n", str(n), "--csv"]


def set_rps(port, keys, n):
    out = subprocess.run(benchmark_cmd(port, keys, n), capture_output=True, text=True,
                         check=True).stdout
    line = [l for l in out.splitlines() if l.startswith('"SET')][0]
    return float(line.split(",")[1].strip('"'))


def lag_probe(master_port, replica_port, interval, stop, out):
    """Writes timestamped keys on the master and polls the replica for
    them until `stop` is set; appends (lag, get_rtt, set_rtt) in ns."""
    m, r = Conn(master_port), Conn(replica_port)
    i = 0
    while not stop.is_set():
        i += 1
        key = b"lagprobe:%d" % i
        t0 = time.monotonic_ns()
        val = b"%d" % t0
        m.call(b"SET", key, val)
        t_ack = time.monotonic_ns()
        get_rtt = 0
        gets = 0
        while True:
            g0 = time.monotonic_ns()
            v = r.call(b"GET", key)
            g1 = time.monotonic_ns()
            gets += 1
            get_rtt = g1 - g0
            if v == val:
                break
            if g1 - t_ack > 5_000_000_000:
                raise SystemExit(f"lagprobe:{i} not on the replica after 5 s")
        out.append((g1 - t_ack, get_rtt, t_ack - t0, gets))
        rest = interval - (time.monotonic_ns() - t0)
        if rest > 0:
            time.sleep(rest / 1e9)
    m.close()
    r.close()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def lag_under_load(master, replica, keys, n, interval_ms):
    """Runs the probe while redis-benchmark loads the master."""
    attach(master, replica)
    bench_proc = subprocess.Popen(benchmark_cmd(master.port, keys, n),
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    time.sleep(0.5)  # past the benchmark's connection set-up
    stop = threading.Event()
    samples = []
    th = threading.Thread(target=lag_probe,
                          args=(master.port, replica.port, int(interval_ms * 1e6), stop, samples))
    th.start()
    out, _ = bench_proc.communicate()
    stop.set()
    th.join()
    line = [l for l in out.splitlines() if l.startswith('"SET')][0]
    rps = float(line.split(",")[1].strip('"'))
    return samples, rps


def cpu_secs(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def empty_rdb():
    """An empty data set's RDB file, as redis-server writes it."""
    s = Server("redis", "redis-server", tempfile.mkdtemp(prefix="rbench-empty-"), [])
    s.start()
    try:
        cli(s.port, "save")
        with open(os.path.join(s.dir, "dump.rdb"), "rb") as f:
            return f.read()
    finally:
        stop(s)


def set_stream(count, keys, rng):
    out = []
    for _ in range(count):
        k = b"key:%012d" % rng.randrange(keys)
        out.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$3\r\nxxx\r\n" % (len(k), k))
    return b"".join(out)


def apply_cost(replica, rdb, keys, n):
    """Plays master to `replica`: handshake, an empty full sync, every key
    once, then `n` SETs; returns the replica's CPU microseconds per SET."""
    import random
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    rng = random.Random(1)
    prefill = b"".join(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$3\r\nxxx\r\n" % i
                       for i in range(keys))
    body = set_stream(n, keys, rng)
    cli(replica.port, "replicaof", "127.0.0.1", str(ls.getsockname()[1]))
    s, _ = ls.accept()
    f = s.makefile("rb")
    while True:
        argc = int(f.readline()[1:])
        args = []
        for _ in range(argc):
            ln = int(f.readline()[1:])
            args.append(f.read(ln + 2)[:-2])
        name = args[0].upper()
        if name == b"PING":
            s.sendall(b"+PONG\r\n")
        elif name == b"REPLCONF":
            s.sendall(b"+OK\r\n")
        elif name in (b"PSYNC", b"SYNC"):
            s.sendall(b"+FULLRESYNC " + b"f" * 40 + b" 0\r\n$%d\r\n" % len(rdb) + rdb)
            break
    while field(replica.port, "replication", "master_link_status") != "up":
        time.sleep(0.02)

    def applied():
        return int(field(replica.port, "replication", "master_repl_offset") or 0)
    s.sendall(prefill)
    while applied() < len(prefill):
        time.sleep(0.02)
    c0 = cpu_secs(replica.proc.pid)
    s.sendall(body)
    while applied() < len(prefill) + len(body):
        time.sleep(0.005)
    c1 = cpu_secs(replica.proc.pid)
    s.close()
    ls.close()
    return (c1 - c0) * 1e6 / n


def part_apply(a, kinds, rows):
    rdb = empty_rdb()
    costs = {name: [] for name in kinds}
    for run in range(a.runs):
        for name, binary in kinds.items():
            r = Server(name, binary, tempfile.mkdtemp(prefix=f"rbench-{name}-a-"),
                       ["--appendonly", "no"] if name == "redis" else [])
            r.start()
            try:
                costs[name].append(apply_cost(r, rdb, a.bench_keys, a.apply_n))
            finally:
                stop(r)
            print(f"run {run} {name} apply: {costs[name][-1]:.3f} us/SET", file=sys.stderr)
    for name in kinds:
        rows.append((f"replica CPU per applied SET ({name}), median of {a.runs}",
                     f"{statistics.median(costs[name]):.3f} us (runs: {', '.join(f'{x:.3f}' for x in costs[name])})"))


def fmt_ms(ns):
    return f"{ns / 1e6:.2f}"


def part_sync(a, kinds, common, rows):
    common = common + (["--repl-diskless-load", a.diskless_load]
                       if a.diskless_load != "disabled" else [])
    extra = {n: common + (["--appendonly", "no"] if n == "redis" else []) for n in kinds}
    masters = {n: Server(n, b, tempfile.mkdtemp(prefix=f"rbench-{n}-m-"), extra[n])
               for n, b in kinds.items()}
    times = {n: [] for n in kinds}
    try:
        for name, m in masters.items():
            m.start()
            load_data(m.port, a.keys, a.value_size)
            assert int(cli(m.port, "dbsize")) == a.keys
        # Fresh replicas, the kinds taking turns: a shared machine's load
        # shifts alike for all.
        for _ in range(a.runs):
            for name, binary in kinds.items():
                r = Server(name, binary, tempfile.mkdtemp(prefix=f"rbench-{name}-r-"), extra[name])
                r.start()
                try:
                    times[name].append(full_sync_secs(masters[name], r, a.keys))
                finally:
                    stop(r)
                print(f"{name}: sync {times[name][-1]:.2f} s", file=sys.stderr)
    finally:
        stop(*masters.values())
    sync = {n: statistics.median(t) for n, t in times.items()}
    for name in kinds:
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        label = f"full sync {a.keys} x {a.value_size} B ({name}, repl-diskless-load {a.diskless_load})"
        rows.append((label, f"{sync[name]:.2f} s" + (f" (median of {runs})" if a.runs > 1 else "")))
    rows.append(("full sync time ratio ferrokv/redis", f"{sync['ferrokv'] / sync['redis']:.2f}x"))


def start_pair(name, binary, common):
    extra = common + (["--appendonly", "no"] if name == "redis" else [])
    m_extra, r_extra = extra, extra
    if name.endswith("-rdma-link"):
        # The whole replication link over an RDMA connection (libfabric's
        # tcp provider here), the snapshot by the one-sided push.
        m_extra = extra + ["--rdma-bind", "127.0.0.1", "--rdma-port", "0"]
        r_extra = extra + ["--replica-rdma", "yes"]
    m = Server(name, binary, tempfile.mkdtemp(prefix=f"rbench-{name}-m-"), m_extra)
    r = Server(name, binary, tempfile.mkdtemp(prefix=f"rbench-{name}-r-"), r_extra)
    m.start()
    r.start()
    return m, r


def part_throughput(a, kinds, common, rows):
    pairs = {name: start_pair(name, binary, common) for name, binary in kinds.items()}
    rps = {name: {"solo": [], "replica": []} for name in kinds}
    # CPU microseconds per SET: master alone, master with a replica, replica.
    cost = {name: {"solo": [], "replica": [], "applying": []} for name in kinds}
    try:
        for run in range(a.runs):
            for name, (m, r) in pairs.items():
                for mode in (("solo", "replica") if run % 2 == 0 else ("replica", "solo")):
                    if mode == "solo":
                        detach(m, r)
                    else:
                        attach(m, r)
                    cm, cr = cpu_secs(m.proc.pid), cpu_secs(r.proc.pid)
                    x = set_rps(m.port, a.bench_keys, a.bench_n)
                    if mode == "replica":
                        # The replica may still be applying the last commands.
                        caught_up(m, r)
                        cost[name]["applying"].append((cpu_secs(r.proc.pid) - cr) * 1e6 / a.bench_n)
                    cost[name][mode].append((cpu_secs(m.proc.pid) - cm) * 1e6 / a.bench_n)
                    rps[name][mode].append(x)
                    print(f"run {run} {name} {mode}: {x:.0f}", file=sys.stderr)
    finally:
        for m, r in pairs.values():
            stop(m, r)
    for name in kinds:
        solo = statistics.median(rps[name]["solo"])
        repl = statistics.median(rps[name]["replica"])
        rows.append((f"master SET rps, no replica ({name}), median of {a.runs}",
                     f"{solo:,.0f} (runs: {', '.join(f'{x:,.0f}' for x in rps[name]['solo'])})"))
        rows.append((f"master SET rps, one replica ({name}), median of {a.runs}",
                     f"{repl:,.0f} (runs: {', '.join(f'{x:,.0f}' for x in rps[name]['replica'])})"))
        rows.append((f"with/without replica ({name})", f"{repl / solo:.2f}x"))
        med = {k: statistics.median(v) for k, v in cost[name].items()}
        rows.append((f"CPU per SET ({name}), medians: master alone / master with replica / replica",
                     f"{med['solo']:.2f} / {med['replica']:.2f} / {med['applying']:.2f} us"))


def part_lag(a, kinds, common, rows):
    """`--lag-runs` rounds, the kinds taking turns in each, a fresh pair
    per run; medians of the runs' percentiles, with every run's p99."""
    per = {name: [] for name in kinds}
    for run in range(a.lag_runs):
        for name, binary in kinds.items():
            m, r = start_pair(name, binary, common)
            try:
                samples, rps = lag_under_load(m, r, a.bench_keys, a.lag_n, a.probe_interval_ms)
                link = field(r.port, "rdma", "rdma_repl_link") if name != "redis" else "tcp"
                if name.endswith("-rdma-link") and link != "rdma":
                    raise SystemExit(f"{name}: the link ran over {link!r}, not RDMA")
            finally:
                stop(m, r)
            lag = [s[0] for s in samples]
            get = [s[1] for s in samples]
            st = [s[2] for s in samples]
            first = sum(1 for x in samples if x[3] == 1) / len(samples)
            per[name].append({
                "probes": len(samples), "rps": rps, "first": first,
                "lag": [pct(lag, 50), pct(lag, 90), pct(lag, 99), max(lag)],
                "get": [pct(get, 50), pct(get, 99)], "set": [pct(st, 50), pct(st, 99)],
            })
            print(f"run {run + 1} {name}: {len(samples)} probes at {rps:,.0f} SET/s, lag p50 "
                  f"{fmt_ms(pct(lag, 50))} p99 {fmt_ms(pct(lag, 99))} max {fmt_ms(max(lag))} ms, "
                  f"GET p99 {fmt_ms(pct(get, 99))} ms, first GET {100 * first:.0f}%", file=sys.stderr)
    for name, runs in per.items():
        med = lambda key, i: statistics.median(x[key][i] for x in runs)  # noqa: E731
        rows.append((f"lag master reply -> replica visible ({name}), medians of {len(runs)} runs "
                     f"({sum(x['probes'] for x in runs)} probes, SET at "
                     f"{statistics.median(x['rps'] for x in runs):,.0f} rps)",
                     f"p50 {fmt_ms(med('lag', 0))} ms, p90 {fmt_ms(med('lag', 1))} ms, "
                     f"p99 {fmt_ms(med('lag', 2))} ms (runs: "
                     + ", ".join(fmt_ms(x["lag"][2]) for x in runs)
                     + f"), max {fmt_ms(max(x['lag'][3] for x in runs))} ms; visible at the first GET: "
                     f"{100 * statistics.median(x['first'] for x in runs):.0f}%"))
        rows.append((f"probe GET round trip on the replica ({name})",
                     f"p50 {fmt_ms(med('get', 0))} ms, p99 {fmt_ms(med('get', 1))} ms"))
        rows.append((f"probe SET round trip on the master ({name})",
                     f"p50 {fmt_ms(med('set', 0))} ms, p99 {fmt_ms(med('set', 1))} ms"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000, help="full sync data set keys")
    ap.add_argument("--value-size", type=int, default=1000, help="full sync value size")
    ap.add_argument("--parts", default="sync,throughput,lag,apply")
    ap.add_argument("--runs", type=int, default=5, help="full syncs per server; throughput runs per mode")
    ap.add_argument("--sync-only", action="store_true", help="the same as --parts sync")
    ap.add_argument("--diskless-load", default="disabled",
                    choices=["disabled", "on-empty-db", "swapdb"],
                    help="repl-diskless-load of both replicas (part sync)")
    ap.add_argument("--bench-keys", type=int, default=1_000_000, help="redis-benchmark -r")
    ap.add_argument("--bench-n", type=int, default=2_000_000, help="redis-benchmark -n (throughput)")
    ap.add_argument("--lag-n", type=int, default=5_000_000, help="redis-benchmark -n (lag)")
    ap.add_argument("--probe-interval-ms", type=float, default=5.0)
    ap.add_argument("--lag-runs", type=int, default=1, help="rounds of the lag part")
    ap.add_argument("--apply-n", type=int, default=2_000_000, help="SETs in the apply stream")
    ap.add_argument("--baseline", help="another ferrokv-server binary, measured as 'ferrokv-before'")
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--rdma-link", action="store_true",
                    help="also measure ferrokv with the replication link over RDMA "
                         "('ferrokv-rdma-link': rdma-bind on the master, replica-rdma yes)")
    a = ap.parse_args()
    common = ["--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
              "--rdbcompression", "yes"]
    kinds = {"ferrokv": a.ferrokv, "redis": a.redis}
    if a.baseline:
        kinds = {"ferrokv": a.ferrokv, "ferrokv-before": a.baseline, "redis": a.redis}
    if a.rdma_link:
        kinds = {"ferrokv": kinds.pop("ferrokv"), "ferrokv-rdma-link": a.ferrokv, **kinds}
    parts = ["sync"] if a.sync_only else a.parts.split(",")
    rows = []
    if "sync" in parts:
        part_sync(a, kinds, common, rows)
    if "throughput" in parts:
        part_throughput(a, kinds, common, rows)
    if "lag" in parts:
        part_lag(a, kinds, common, rows)
    if "apply" in parts:
        part_apply(a, kinds, rows)
    print("| measure | value |\n|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
