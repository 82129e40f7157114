#!/usr/bin/env python3
"""What misbehaving clients cost ferrokv-server and redis-server, side by side.

Each attack runs against a fresh server (ferrokv with its defaults, ferrokv
with `client-reply-backpressure 0` — the behaviour before the bound, which
is also Redis's — and redis-server 7.0 with its defaults) while a victim
connection sends PING every 10 ms. Printed per attack and server: the
victim's worst and median PING round trip while the attack runs, the
server's peak RSS beyond its RSS before the attack, and whether it was
still alive afterwards.

  python3 scripts/bench_hostile.py [--seconds 5] [--value-mib 1] [--runs 3]

Attacks:
  never-reading   one client pipelines `GET big` (a --value-mib MiB value)
                  as fast as it can and never reads a reply;
  declared-bulk   50 connections each send `*1\\r\\n$536870912\\r\\nx` and
                  then nothing (with requirepass unset: the post-AUTH path);
  exec-amplify    one client queues 2000 `GET big` in MULTI and sends EXEC
                  without reading (one command, a 2000 x value reply) — run
                  with `maxmemory-clients 64mb` on both servers, the bound
                  for single large replies.
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
from benchlib import ROOT, free_port, rss_bytes  # noqa: E402


def start(kind, extra):
    port = free_port()
    d = tempfile.mkdtemp(prefix=f"hostile-{kind}-")
    if kind == "redis":
        argv = ["redis-server", "--port", str(port), "--dir", d, "--save", "",
                "--appendonly", "no"] + extra
    else:
        binary = os.path.join(ROOT, "target", "release", "ferrokv-server")
        argv = [binary, "--port", str(port), "--dir", d, "--save", ""] + extra
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p, port, d
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{kind} did not start")


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def call(port, *args):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(resp(*args))
    buf = b""
    while not buf.endswith(b"\r\n"):
        buf += s.recv(1 << 20)
    s.close()
    return buf


class Victim(threading.Thread):
    """PINGs every 10 ms; records round trips (a missed reply counts as the
    time until the attack ended)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(30)
        self.rtts = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                self.sock.sendall(b"PING\r\n")
                got = b""
                while not got.endswith(b"\r\n"):
                    chunk = self.sock.recv(64)
                    if not chunk:
                        raise OSError("closed")
                    got += chunk
            except OSError:
                self.rtts.append(float("inf"))
                return
            self.rtts.append(time.monotonic() - t0)
            time.sleep(0.01)


def sample_rss(pid, stop, peak):
    while not stop.is_set():
        try:
            peak[0] = max(peak[0], rss_bytes(pid))
        except OSError:
            return
        time.sleep(0.02)


def attack_never_reading(port, seconds, value_mib):
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    batch = resp("GET", "big") * 1000
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            s.send(batch)
        except BlockingIOError:
            time.sleep(0.001)
        except OSError:
            break
    return [s]


def attack_declared_bulk(port, seconds, value_mib):
    socks = []
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"*1\r\n$536870912\r\nx")
        socks.append(s)
    time.sleep(seconds)
    return socks


def attack_exec_amplify(port, seconds, value_mib):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(resp("MULTI") + resp("GET", "big") * 2000 + resp("EXEC"))
    time.sleep(seconds)
    return [s]


ATTACKS = {
    "never-reading": (attack_never_reading, []),
    "declared-bulk": (attack_declared_bulk, []),
    "exec-amplify": (attack_exec_amplify, ["--maxmemory-clients", "64mb"]),
}

SERVERS = [
    ("ferrokv", "ferrokv", []),
    ("ferrokv bp=0", "ferrokv", ["--client-reply-backpressure", "0"]),
    ("redis", "redis", []),
]


def run_one(kind, extra, attack, seconds, value_mib):
    p, port, d = start(kind, extra)
    try:
        call(port, "SET", "big", b"x" * (value_mib << 20))
        base = rss_bytes(p.pid)
        victim = Victim(port)
        victim.start()
        stop = threading.Event()
        peak = [base]
        sampler = threading.Thread(target=sample_rss, args=(p.pid, stop, peak), daemon=True)
        sampler.start()
        socks = ATTACKS[attack][0](port, seconds, value_mib)
        victim.stop.set()
        victim.join(timeout=40)
        stop.set()
        sampler.join()
        for s in socks:
            s.close()
        time.sleep(0.5)
        alive = p.poll() is None and call(port, "PING") == b"+PONG\r\n"
        rtts = victim.rtts or [float("inf")]
        return max(rtts), statistics.median(rtts), peak[0] - base, alive
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--value-mib", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--attacks", default=",".join(ATTACKS))
    a = ap.parse_args()
    print(f"{'attack':<15} {'server':<13} {'max PING ms':>12} {'median PING ms':>15} "
          f"{'peak RSS growth MiB':>20} {'alive':>6}   (median of {a.runs} runs)")
    for attack in a.attacks.split(","):
        for label, kind, extra in SERVERS:
            rows = [run_one(kind, extra + ATTACKS[attack][1], attack, a.seconds, a.value_mib)
                    for _ in range(a.runs)]
            mx = statistics.median(r[0] for r in rows) * 1e3
            md = statistics.median(r[1] for r in rows) * 1e3
            rss = statistics.median(r[2] for r in rows) / (1 << 20)
            alive = all(r[3] for r in rows)
            print(f"{attack:<15} {label:<13} {mx:>12.1f} {md:>15.2f} {rss:>20.1f} {str(alive):>6}",
                  flush=True)


if __name__ == "__main__":
    main()
