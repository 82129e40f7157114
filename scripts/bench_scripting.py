#!/usr/bin/env python3
"""Scripting throughput and memory, ferrokv-server beside redis-server 7.0.

Workloads, each with redis-benchmark (-c 50 -P 16 by default, keys drawn
from 10k with -r), a fresh server of each kind per round, rounds
interleaved so both see the same machine state; the median of the rounds
and the ratio are printed:

  evalsha-get   EVALSHA of `return redis.call('GET', KEYS[1])`
  evalsha-rate  EVALSHA of a token-bucket rate limiter (HMGET, arithmetic,
                HSET, PEXPIRE: the usual Lua limiter)
  fcall-get     FCALL of the same GET as a library function
  fcall-rate    FCALL of the same limiter

Memory per cached script: N distinct scripts loaded with SCRIPT LOAD, the
server's memory before and after, divided by N (ferrokv: used_memory, which
counts its Lua heaps; Redis: used_memory + used_memory_lua, since Redis's
used_memory leaves the Lua heap out).

  python3 scripts/bench_scripting.py [--requests 400000] [--rounds 3]
      [--clients 50] [--pipeline 16] [--scripts 20000]

Needs target/release/ferrokv-server (cargo build --release -p ferrokv-server).
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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, cli, cpu_seconds, free_port  # noqa: E402

GET = "return redis.call('GET', KEYS[1])"
RATE = """
local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(s[1]) or burst, tonumber(s[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1 allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], 60000)
return allowed
"""
LIB = ("#!lua name=benchlib\n"
       "redis.register_function{function_name='get', callback=function(keys) "
       "return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n"
       "redis.register_function('rate', function(KEYS, ARGV)\n" + RATE + "\nend)\n")


def start(kind):
    port = free_port()
    d = tempfile.mkdtemp(prefix=f"bench-scripting-{kind}-")
    if kind == "redis":
        argv = ["redis-server", "--port", str(port), "--dir", d, "--save", "",
                "--appendonly", "no"]
    else:
        binary = os.path.join(ROOT, "target", "release", "ferrokv-server")
        argv = [binary, "--port", str(port), "--dir", d, "--save", ""]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p, port, d
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{kind} did not start")


def stop(p, d):
    p.kill()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)


def bench(port, args, requests, clients, pipeline):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", str(clients),
         "-P", str(pipeline), "-r", "10000", "-q"] + args,
        capture_output=True, text=True).stdout
    m = re.findall(r"([\d.]+) requests per second", out)
    if not m:
        raise SystemExit(f"redis-benchmark printed nothing usable: {out!r}")
    return float(m[-1])


def workloads(port):
    for i in range(0, 10000, 1000):
        args = ["MSET"]
        for k in range(i, i + 1000):
            args += [f"key:{k:012d}", "v" * 32]
        cli(port, *args)
    get_sha = cli(port, "SCRIPT", "LOAD", GET)
    rate_sha = cli(port, "SCRIPT", "LOAD", RATE)
    cli(port, "FUNCTION", "LOAD", "REPLACE", LIB)
    return {
        "evalsha-get": ["EVALSHA", get_sha, "1", "key:__rand_int__"],
        "evalsha-rate": ["EVALSHA", rate_sha, "1", "rl:__rand_int__", "1", "10", "1700000000"],
        "fcall-get": ["FCALL", "get", "1", "key:__rand_int__"],
        "fcall-rate": ["FCALL", "rate", "1", "rl:__rand_int__", "1", "10", "1700000000"],
    }


def used_memory(port):
    """Bytes the server holds, Lua's heap included: ferrokv's used_memory
    counts every allocation (Lua's go through the same allocator); Redis's
    leaves its Lua heap out (used_memory_lua), so that is added."""
    info = cli(port, "INFO", "memory")
    used = int(re.search(r"used_memory:(\d+)", info).group(1))
    lua = re.search(r"used_memory_lua:(\d+)", info)
    if "ferrokv" not in cli(port, "INFO", "server") and lua:
        used += int(lua.group(1))
    return used


def script_memory(kind, n):
    p, port, d = start(kind)
    try:
        before = used_memory(port)
        s = socket.create_connection(("127.0.0.1", port))
        batch = b""
        for i in range(n):
            body = f"return redis.call('GET', KEYS[1]) .. '{i}'".encode()
            batch += b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n" % (len(body), body)
        s.sendall(batch)
        got = 0
        buf = b""
        while got < n:
            buf += s.recv(1 << 20)
            got = buf.count(b"\r\n") // 2
        s.close()
        time.sleep(0.2)
        return (used_memory(port) - before) / n
    finally:
        stop(p, d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--scripts", type=int, default=20000)
    a = ap.parse_args()
    results = {}
    cpu = {}
    for r in range(a.rounds):
        for kind in ("ferrokv", "redis") if r % 2 == 0 else ("redis", "ferrokv"):
            p, port, d = start(kind)
            try:
                for name, args in workloads(port).items():
                    c0 = cpu_seconds(p.pid)
                    rps = bench(port, args, a.requests, a.clients, a.pipeline)
                    us = (cpu_seconds(p.pid) - c0) / a.requests * 1e6
                    results.setdefault(name, {}).setdefault(kind, []).append(rps)
                    cpu.setdefault(name, {}).setdefault(kind, []).append(us)
            finally:
                stop(p, d)
    print(f"redis-benchmark -c {a.clients} -P {a.pipeline} -n {a.requests}, "
          f"median of {a.rounds} rounds (requests/s)")
    print(f"{'workload':<14} {'ferrokv':>12} {'redis':>12} {'ratio':>7}"
          f"   server CPU us/request: {'ferrokv':>8} {'redis':>8} {'ratio':>6}")
    for name, by in results.items():
        f = statistics.median(by["ferrokv"])
        rd = statistics.median(by["redis"])
        cf = statistics.median(cpu[name]["ferrokv"])
        cr = statistics.median(cpu[name]["redis"])
        print(f"{name:<14} {f:>12.0f} {rd:>12.0f} {f / rd:>7.2f}"
              f"   {'':>22} {cf:>8.2f} {cr:>8.2f} {cf / cr:>6.2f}")
    fk = script_memory("ferrokv", a.scripts)
    rd = script_memory("redis", a.scripts)
    print(f"memory per cached script ({a.scripts} scripts of ~45 bytes): "
          f"ferrokv {fk:.0f} B, redis {rd:.0f} B, ratio {fk / rd:.2f}")


if __name__ == "__main__":
    main()
