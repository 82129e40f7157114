#!/usr/bin/env python3
"""GET/SET over TLS, ferrokv beside the real redis-server in the same run
(issue #21's targets: >= 1.3x Redis-over-TLS throughput with -c 50 -P 16,
and TLS handshakes per second >= Redis's).

Both servers get the same certificate (EC P-256, made here with the
openssl command), `tls-auth-clients no`, `port 0` (TLS only) and no
persistence. Each round runs, for each server in turn (rounds rotate who
goes first):
  - redis-benchmark --tls -c 50 -P 16 -t get,set: requests/s;
  - redis-benchmark --tls -k 0 -c 8 -t ping: a new connection, so a new
    TLS handshake, per request (handshakes/s).
The figures are the medians of the rounds.

  python3 scripts/bench_tls.py [--rounds 5] [--requests 1000000]
      [--handshakes 20000]

Needs $CARGO_TARGET_DIR (or target)/release/ferrokv-server
(cargo build --release -p ferrokv-server), redis-server and
redis-benchmark 7.0 built with TLS (Debian's are).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, free_port  # noqa: E402

TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "release", "ferrokv-server")


def certs(d):
    def run(*a):
        subprocess.run(a, check=True, capture_output=True)
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.crt"))
    ext = os.path.join(d, "ext")
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=bench CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "2", "-extfile", ext)
    return ca, crt, key


def start(binary, d, port, ca, crt, key):
    args = [binary, "--port", "0", "--tls-port", str(port), "--tls-cert-file", crt,
            "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no",
            "--save", "", "--appendonly", "no", "--dir", d]
    log = open(os.path.join(d, "server.log"), "w")
    p = subprocess.Popen(args, stdout=log, stderr=log)
    for _ in range(200):
        r = subprocess.run(["redis-cli", "-p", str(port), "--tls", "--cacert", ca, "PING"],
                           capture_output=True, text=True)
        if r.stdout.strip() == "PONG":
            return p
        time.sleep(0.05)
    raise SystemExit(f"{binary} did not start: see {d}/server.log")


def bench(port, ca, *args):
    out = subprocess.run(["redis-benchmark", "-p", str(port), "--tls", "--cacert", ca,
                          "-q", *args], capture_output=True, text=True).stdout
    # "-q" prints "SET: 123456.79 requests per second, p50=..." per test,
    # after \r-separated progress lines.
    rates = {}
    for m in re.finditer(r"([A-Z_]+): ([0-9.]+) requests per second", out):
        rates[m.group(1)] = float(m.group(2))
    return rates


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=1000000)
    ap.add_argument("--handshakes", type=int, default=20000)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="bench-tls-")
    ca, crt, key = certs(d)
    servers = {}
    for name, binary in (("ferrokv", BIN), ("redis", "redis-server")):
        sd = os.path.join(d, name)
        os.makedirs(sd)
        port = free_port()
        servers[name] = (start(binary, sd, port, ca, crt, key), port)
    results = {n: {"SET": [], "GET": [], "handshakes": []} for n in servers}
    try:
        names = list(servers)
        for r in range(a.rounds):
            order = names[r % 2:] + names[:r % 2]
            for n in order:
                port = servers[n][1]
                rates = bench(port, ca, "-c", "50", "-P", "16", "-t", "set,get",
                              "-n", str(a.requests), "-r", "100000", "-d", "64")
                results[n]["SET"].append(rates.get("SET", 0.0))
                results[n]["GET"].append(rates.get("GET", 0.0))
                hs = bench(port, ca, "-k", "0", "-c", "8", "-t", "ping",
                           "-n", str(a.handshakes))
                results[n]["handshakes"].append(hs.get("PING_INLINE", 0.0))
            print(f"round {r + 1}: " + ", ".join(
                f"{n} SET {results[n]['SET'][-1]:.0f} GET {results[n]['GET'][-1]:.0f} "
                f"hs {results[n]['handshakes'][-1]:.0f}" for n in names), flush=True)
    finally:
        for p, _ in servers.values():
            p.terminate()
            p.wait()
        shutil.rmtree(d, ignore_errors=True)
    med = {n: {k: statistics.median(v) for k, v in m.items()} for n, m in results.items()}
    print(f"\nmedians of {a.rounds} rounds (requests/s; handshakes/s):")
    print(f"{'':10} {'SET -P16':>12} {'GET -P16':>12} {'handshakes':>12}")
    for n in names:
        m = med[n]
        print(f"{n:10} {m['SET']:12.0f} {m['GET']:12.0f} {m['handshakes']:12.0f}")
    f, r = med["ferrokv"], med["redis"]
    print(f"{'ratio':10} {f['SET'] / r['SET']:12.2f} {f['GET'] / r['GET']:12.2f} "
          f"{f['handshakes'] / r['handshakes']:12.2f}")


if __name__ == "__main__":
    main()
