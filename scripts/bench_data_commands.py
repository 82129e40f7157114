#!/usr/bin/env python3
"""The data commands of issue #18, ferrokv beside redis-server in one run.

  python3 scripts/bench_data_commands.py [--rounds 5] [--scale 1.0]
      [--only setbit,bitcount_1mb,...]

Each workload: a setup (run once per server, before the rounds), then
`redis-benchmark -c 50 -P 16 -n N [-r R] <command>` with the command given
literally (`__rand_int__` replaced by redis-benchmark with 0..R-1). The
servers take turns round by round, and the figures are medians of the
rounds: requests per second and the server's CPU time per request (from
/proc), whose ratio is what to quote on a shared 2-core machine.

Workloads (the issue's list; more families join as they are built):
- setbit, getbit: one bit in the middle of a 1 MB bitmap (8 Mbit).
- setbit_100k_keys: a bit of one of 100,000 small bitmaps (made on the
  first runs).
- bitcount_1mb: BITCOUNT of a 1 MB string of random bytes.
- sort_1000: SORT of a 1,000-element list of random integers (LIMIT 0 10,
  so the reply is small and the sort is the work).
- pfadd_dense: PFADD of a random element to a dense HLL (100,000 elements).
- pfadd_sparse_100k_keys: PFADD of a random element to one of 100,000
  small (sparse) HLLs.
- pfcount_3_keys: PFCOUNT of three dense HLLs (the union: every register
  of the three merged and counted each time).
- pfmerge: PFMERGE of two dense HLLs into a third.
- geoadd: GEOADD of a random point (within a degree of 13 E 38 N) as a
  random member of one set, which grows to up to 1,000,000 members.
- geosearch_1000: GEOSEARCH FROMLONLAT BYRADIUS ASC in a set of 100,000
  points spread evenly over 10 x 10 degrees at the equator; the radius
  (62.7 km) holds about 1,000 of them (the setup prints how many), all
  returned, nearest first.
- xadd: XADD of an entry of two small fields (`f1 v1 f2 v2`, generated
  ID) to one stream, which grows to 2,000,000 entries.
- xrange_100: XRANGE - + COUNT 100 of a 100,000-entry stream (the first
  100 entries, replied in full).
- xreadgroup_10: XREADGROUP GROUP g c COUNT 10 STREAMS st:rg > on a
  1,000,000-entry stream: each call delivers the next 10 entries to one
  consumer and adds them to the group's PEL (a worker before its XACKs).
  Each run gets a fresh group from ID 0 (XGROUP CREATE before, DESTROY
  after, outside the measured time) and reads 100,000 x 10 entries.

`--stream-memory` instead measures the memory of a stream of 1,000,000
entries of two small fields (`XADD mem * f1 v1 f2 v2` by redis-benchmark,
`used_memory` before and after on each server, fresh servers).
"""
import argparse
import os
import random
import socket
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cpu_seconds, free_port  # noqa: E402
from bench_vs_redis import start  # noqa: E402


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def send_all(port, payload):
    """Sends one command and waits for its one-line reply."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(payload)
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        if got.startswith(b"-"):
            raise SystemExit(f"setup failed: {got!r}")


def setup_bitmaps(port):
    rnd = random.Random(7)
    send_all(port, resp("SET", "bm1m", bytes(rnd.getrandbits(8) for _ in range(1 << 20))))
    send_all(port, resp("SETBIT", "bm", (1 << 23) - 1, 1))


def setup_sort(port):
    rnd = random.Random(11)
    send_all(port, resp("RPUSH", "sortlist", *[str(rnd.randrange(1_000_000)) for _ in range(1000)]))


def setup_hll(port):
    for key in ("hll:a", "hll:b", "hll:c"):
        for chunk in range(100):
            send_all(port, resp("PFADD", key, *[f"{key}:{chunk}:{i}" for i in range(1000)]))


def setup_geo(port):
    rnd = random.Random(13)
    for chunk in range(100):
        args = []
        for i in range(1000):
            args += [f"{rnd.uniform(0, 10):.6f}", f"{rnd.uniform(-5, 5):.6f}", f"p{chunk}:{i}"]
        send_all(port, resp("GEOADD", "geo:100k", *args))
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp("EVAL", "return #redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT', 5, 0,"
                       " 'BYRADIUS', 62.7, 'km', 'ASC')", 1, "geo:100k"))
        print(f"geosearch_1000 returns {s.recv(100).decode().strip()} points", file=sys.stderr)


def setup_stream(port):
    for chunk in range(100):
        cmds = b"".join(resp("XADD", "st:big", f"{chunk * 1000 + i + 1}-0", "f1", "v1", "f2", "v2")
                        for i in range(1000))
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(cmds)
            got = b""
            while got.count(b"\r\n") < 1000:
                got += s.recv(65536)


def setup_stream_group(port):
    subprocess.run(["redis-benchmark", "-p", str(port), "-n", "1000000", "-c", "1", "-P", "100",
                    "XADD", "st:rg", "*", "f1", "v1", "f2", "v2"], capture_output=True, check=True)


def command(port, *args):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp(*args))
        got = s.recv(65536)
    if got.startswith(b"-"):
        raise SystemExit(f"{args}: {got!r}")


def used_memory(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(resp("INFO", "memory"))
        got = b""
        while b"used_memory:" not in got or not got.endswith(b"\r\n"):
            got += s.recv(65536)
    for line in got.decode().splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    raise SystemExit("no used_memory")


def stream_memory(a):
    out = {}
    for name, argv in (("ferrokv", [a.ferrokv]), ("redis", ["redis-server"])):
        port = free_port()
        p = start(name, argv, port)
        try:
            before = used_memory(port)
            subprocess.run(["redis-benchmark", "-p", str(port), "-n", "1000000", "-c", "1", "-P", "100",
                            "XADD", "mem", "*", "f1", "v1", "f2", "v2"], capture_output=True, check=True)
            out[name] = used_memory(port) - before
        finally:
            p.kill()
            p.wait()
    f, r = out["ferrokv"], out["redis"]
    print("| stream of 1,000,000 entries | ferrokv used_memory growth | redis | ratio |")
    print("|---|---|---|---|")
    print(f"| XADD mem * f1 v1 f2 v2 | {f:,} B ({f / 1e6:.1f} B/entry) | {r:,} B ({r / 1e6:.1f} B/entry) | "
          f"{f / r:.2f}x |")


# name -> (setup, command args, requests at scale 1, -r[, (command before
# each run, command after it)]). redis-benchmark
# writes __rand_int__ zero-padded (000000123456), which is no valid bit
# offset for either server: random bits go through random keys instead.
WORKLOADS = {
    "setbit": (setup_bitmaps, ["SETBIT", "bm", "4194303", "1"], 2_000_000, None),
    "setbit_100k_keys": (setup_bitmaps, ["SETBIT", "bm:__rand_int__", "1000", "1"], 2_000_000,
                         100_000),
    "getbit": (setup_bitmaps, ["GETBIT", "bm", "4194303"], 2_000_000, None),
    "bitcount_1mb": (setup_bitmaps, ["BITCOUNT", "bm1m"], 20_000, None),
    "sort_1000": (setup_sort, ["SORT", "sortlist", "LIMIT", "0", "10"], 50_000, None),
    "pfadd_dense": (setup_hll, ["PFADD", "hll:a", "e:__rand_int__"], 2_000_000, 10_000_000),
    "pfadd_sparse_100k_keys": (setup_hll, ["PFADD", "hll:s:__rand_int__", "e:__rand_int__"],
                               2_000_000, 100_000),
    "pfcount_3_keys": (setup_hll, ["PFCOUNT", "hll:a", "hll:b", "hll:c"], 100_000, None),
    "pfmerge": (setup_hll, ["PFMERGE", "hll:m", "hll:a", "hll:b"], 100_000, None),
    "xadd": (setup_stream, ["XADD", "st:add", "*", "f1", "v1", "f2", "v2"], 2_000_000, None),
    "xrange_100": (setup_stream, ["XRANGE", "st:big", "-", "+", "COUNT", "100"], 100_000, None),
    "xreadgroup_10": (setup_stream_group, ["XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS",
                                           "st:rg", ">"], 100_000, None,
                      (["XGROUP", "CREATE", "st:rg", "g", "0"], ["XGROUP", "DESTROY", "st:rg", "g"])),
    "geoadd": (setup_geo, ["GEOADD", "geo:add", "13.__rand_int__", "38.__rand_int__",
                           "m:__rand_int__"], 1_000_000, 1_000_000),
    "geosearch_1000": (setup_geo, ["GEOSEARCH", "geo:100k", "FROMLONLAT", "5", "0", "BYRADIUS",
                                   "62.7", "km", "ASC"], 20_000, None),
}


def run(port, pid, cmd, n, r):
    c0 = cpu_seconds(pid)
    argv = ["redis-benchmark", "-p", str(port), "-n", str(n), "-c", "50", "-P", "16", "--csv"]
    if r:
        argv += ["-r", str(r)]
    out = subprocess.run(argv + cmd, capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - c0
    line = [l for l in out.splitlines()[1:] if l.strip()][0]
    rps = float(line.split(",")[1].strip('"'))
    return rps, cpu / n * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every workload's requests")
    ap.add_argument("--only", help="comma-separated workloads")
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    ap.add_argument("--stream-memory", action="store_true",
                    help="measure a 1,000,000-entry stream's memory instead")
    a = ap.parse_args()
    if a.stream_memory:
        return stream_memory(a)
    names = a.only.split(",") if a.only else list(WORKLOADS)
    ports = {"ferrokv": free_port(), "redis": free_port()}
    procs = {"ferrokv": start("ferrokv", [a.ferrokv], ports["ferrokv"]),
             "redis": start("redis", ["redis-server"], ports["redis"])}
    try:
        done = set()
        for name in names:
            setup = WORKLOADS[name][0]
            if setup not in done:
                for p in ports.values():
                    setup(p)
                done.add(setup)
        got = {(w, s): [] for w in names for s in procs}
        for rnd in range(a.rounds):
            order = ["ferrokv", "redis"] if rnd % 2 == 0 else ["redis", "ferrokv"]
            for name in names:
                _, cmd, n, r, *hooks = WORKLOADS[name]
                n = max(1000, int(n * a.scale))
                for s in order:
                    if hooks:
                        command(ports[s], *hooks[0][0])
                    x = run(ports[s], procs[s].pid, cmd, n, r)
                    if hooks:
                        command(ports[s], *hooks[0][1])
                    got[(name, s)].append(x)
                    print(f"round {rnd} {name} {s}: {x[0]:,.0f} req/s, {x[1]:.3f} us CPU/req",
                          file=sys.stderr)
        print("| workload | ferrokv req/s | redis req/s | throughput ratio | ferrokv CPU us/req | "
              "redis CPU us/req | CPU ratio |")
        print("|---|---|---|---|---|---|---|")
        for name in names:
            f = [statistics.median(x[i] for x in got[(name, "ferrokv")]) for i in range(2)]
            r = [statistics.median(x[i] for x in got[(name, "redis")]) for i in range(2)]
            print(f"| {name} | {f[0]:,.0f} | {r[0]:,.0f} | {f[0] / r[0]:.2f}x | {f[1]:.3f} | "
                  f"{r[1]:.3f} | {f[1] / r[1]:.2f}x |")
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
