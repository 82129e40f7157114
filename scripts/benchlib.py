"""Helpers shared by the benchmark scripts: free ports, process figures
from /proc, redis-cli calls."""
import os
import socket
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_bytes(pid):
    """Resident set size of a process."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def rss_parts(pid):
    """(RssAnon, RssFile) of a process in bytes: its heap and anonymous
    mappings, and the file pages it has mapped (page cache)."""
    anon = file = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                anon = int(line.split()[1]) * 1024
            elif line.startswith("RssFile:"):
                file = int(line.split()[1]) * 1024
    return anon, file


def cpu_seconds(pid, tid=None):
    """User + system CPU time of a process, or of its thread `tid`
    (/proc/PID/task/TID/stat: the main thread's is tid == pid)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True).stdout.strip()


def start_server(name, argv, port, dirs, wait_s=10.0):
    """Starts a server (`argv` plus --port and a fresh --dir, remembered in
    `dirs`) and returns its process once the port accepts connections."""
    import tempfile
    import time
    d = tempfile.mkdtemp(prefix=f"bench-{name}-")
    dirs.append(d)
    p = subprocess.Popen(argv + ["--port", str(port), "--dir", d],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + wait_s
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return p
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{name} did not start")


def redis_benchmark(port, pid, test, clients, pipeline, n, keyspace, size=32):
    """One `redis-benchmark --csv` run of `test` against the server `pid`
    on `port`: (requests/s, the server's CPU µs per request, p99 ms)."""
    c0 = cpu_seconds(pid)
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-t", test, "-n", str(n), "-r", str(keyspace),
         "-c", str(clients), "-P", str(pipeline), "-d", str(size), "--csv"],
        capture_output=True, text=True, check=True).stdout
    c1 = cpu_seconds(pid)
    line = [l for l in out.splitlines() if l.startswith('"' + test.upper())][0]
    # "test","rps","avg_latency_ms","min_latency_ms","p50","p95","p99","max"
    f = [x.strip('"') for x in line.split(",")]
    return float(f[1]), (c1 - c0) / n * 1e6, float(f[6])
