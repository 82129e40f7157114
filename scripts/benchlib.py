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


def cpu_seconds(pid):
    """User + system CPU time of a process."""
    with open(f"/proc/{pid}/stat") as f:
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
