#!/usr/bin/env python3
"""Cost of the AOF's checksum companions (issue #26): SET throughput of one
ferrokv-server build with `aof-checksums yes` against `aof-checksums no`.

  python3 scripts/bench_aof_checksums.py [--rounds 7] [--requests 1000000]
      [--policies everysec,always] [--pipeline 16]

Each round runs, for each appendfsync policy, the server with the feature
on and with it off (the order alternates from round to round), each time
in a fresh data directory after an `os.sync()` (so one run's page-cache
writeback does not land on the next one's fsyncs): redis-benchmark -t set
-c 50 -P 16 -d 32 -r 1000000. The table gives every round's figures, the
medians, the ratio of the medians (on / off) and the median of the
rounds' own on / off ratios (the two runs of a round are adjacent in time,
so a ratio within a round is less exposed to a neighbour's load). Before each measured run
INFO confirms the feature's state (`aof_checksums`), and after it that
blocks were written (on) or not (off).
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli, free_port  # noqa: E402


def info(port, field):
    for line in cli(port, "info", "persistence").splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return ""


def start(binary, d, args):
    port = free_port()
    p = subprocess.Popen([binary, "--port", str(port), "--dir", d, "--save", ""] + args,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return p, port
        except OSError:
            pass
        if p.poll() is not None:
            raise SystemExit("ferrokv-server exited")
        time.sleep(0.01)
    raise SystemExit("ferrokv-server did not start")


def bench(port, n, pipeline):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", "set", "-n", str(n), "-r", "1000000",
         "-c", "50", "-P", str(pipeline), "-d", "32", "--csv"],
        capture_output=True, text=True, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith('"SET')][0]
    return float(line.split(",")[1].strip('"'))


def one_run(binary, policy, on, n, pipeline):
    os.sync()
    d = tempfile.mkdtemp(prefix="aofsum-bench-")
    p, port = start(binary, d, ["--appendonly", "yes", "--appendfsync", policy,
                                "--aof-checksums", "yes" if on else "no"])
    try:
        assert info(port, "aof_checksums") == ("1" if on else "0")
        rps = bench(port, n, pipeline)
        blocks = int(info(port, "aof_checksum_blocks_written") or 0)
        assert (blocks > 0) == on, (policy, on, blocks)
        return rps
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferrokv", default=os.path.join(ROOT, "target/release/ferrokv-server"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--policies", default="everysec,always")
    a = ap.parse_args()
    policies = a.policies.split(",")
    res = {(p, on): [] for p in policies for on in (True, False)}
    for r in range(a.rounds):
        for policy in policies:
            order = [True, False] if r % 2 == 0 else [False, True]
            for on in order:
                rps = one_run(a.ferrokv, policy, on, a.requests, a.pipeline)
                res[(policy, on)].append(rps)
                print(f"round {r + 1} {policy} checksums {'on' if on else 'off'}: {rps:,.0f} req/s",
                      file=sys.stderr)
    print(f"| SET -c 50 -P {a.pipeline} -d 32, appendfsync | checksums on (req/s, each round) | off | median on | median off | on / off (medians) | median of the rounds' on / off |")
    print("|---|---|---|---|---|---|---|")
    for policy in policies:
        on, off = res[(policy, True)], res[(policy, False)]
        mon, moff = statistics.median(on), statistics.median(off)
        print(f"| {policy} | {', '.join(f'{x:,.0f}' for x in on)} | {', '.join(f'{x:,.0f}' for x in off)} "
              f"| {mon:,.0f} | {moff:,.0f} | {mon / moff:.3f} "
              f"| {statistics.median(x / y for x, y in zip(on, off)):.3f} |")


if __name__ == "__main__":
    main()
