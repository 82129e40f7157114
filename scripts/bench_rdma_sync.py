#!/usr/bin/env python3
"""Full sync of one snapshot over RDMA (libfabric tcp provider) beside
ferrokv's own disk-based TCP sync, same master, same file (docs/rdma.md).

    python3 scripts/bench_rdma_sync.py [--bin target/release/ferrokv-server]
                                       [--mib 512] [--runs 2]

Prints, per run: the master's CRC64 pass, its first-write-to-last-credit
time and the share spent copying into the bounce ring, the replica's
receive time, and the TCP sync's send time (save end -> transfer done),
all read from the servers' logs. Loopback only: the tcp provider is TCP
underneath, so this compares code paths, not RDMA hardware.
"""
import argparse, os, re, socket, subprocess, sys, tempfile, time
from datetime import datetime


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cmd(port, *args):
    s = socket.create_connection(("127.0.0.1", port))
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    s.sendall(out)
    data = s.recv(65536)
    s.close()
    return data


def start(binary, d, port, extra):
    log = open(os.path.join(d, "server.log"), "w")
    p = subprocess.Popen([binary, "--port", str(port), "--dir", d, "--save", ""] + extra,
                         stdout=log, stderr=log)
    for _ in range(500):
        try:
            if cmd(port, "PING").startswith(b"+PONG"):
                return p
        except OSError:
            time.sleep(0.02)
    sys.exit(f"server on {port} did not start")


def ts(line):
    m = re.search(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
    return datetime.fromisoformat(m.group(1)).timestamp()


def wait_log(path, needle, after=0, timeout=600):
    end = time.time() + timeout
    while time.time() < end:
        lines = open(path).read().splitlines()
        hits = [l for l in lines[after:] if needle in l]
        if hits:
            return hits[-1], len(lines)
        time.sleep(0.1)
    sys.exit(f"timeout waiting for {needle!r} in {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/ferrokv-server")
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--runs", type=int, default=2)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench-rdma-")
    md = os.path.join(root, "master"); os.mkdir(md)
    mport = free_port()
    master = start(a.bin, md, mport, ["--rdma-bind", "127.0.0.1", "--rdma-port", "0",
                                      "--repl-diskless-sync", "no"])
    mlog = os.path.join(md, "server.log")
    try:
        for i in range(a.mib // 64):
            s = socket.create_connection(("127.0.0.1", mport))
            v = os.urandom(64 << 20)
            s.sendall(b"*3\r\n$3\r\nSET\r\n$%d\r\nv%d\r\n$%d\r\n" % (len(str(i)) + 1, i, len(v)) + v + b"\r\n")
            s.recv(16)
            s.close()
        print(f"data set: {a.mib} MiB of incompressible values")
        print("| run | mode | master CRC64 s | transfer s | MB/s | bounce copy ms | replica receive s |")
        print("|---|---|---|---|---|---|---|")
        for run in range(1, a.runs + 1):
            for mode in ("rdma", "tcp"):
                rd = os.path.join(root, f"{mode}{run}"); os.mkdir(rd)
                rport = free_port()
                extra = ["--replica-rdma", "yes"] if mode == "rdma" else []
                r = start(a.bin, rd, rport, extra)
                rlog = os.path.join(rd, "server.log")
                mark = len(open(mlog).read().splitlines())
                cmd(rport, "REPLICAOF", "127.0.0.1", mport)
                wait_log(rlog, "Finished with success")
                saved, _ = wait_log(mlog, "DB saved on disk", mark)
                if mode == "rdma":
                    offer, _ = wait_log(mlog, "Offering replica", mark)
                    done, _ = wait_log(mlog, "RDMA transfer to replica", mark)
                    m = re.search(r"in ([\d.]+)s \(([\d.]+) MB/s, ([\d.]+) ms", done)
                    recv, _ = wait_log(rlog, "over RDMA in")
                    rs = re.search(r"over RDMA in ([\d.]+)s", recv).group(1)
                    print(f"| {run} | RDMA | {ts(offer) - ts(saved):.2f} | {m.group(1)} | {m.group(2)} | {m.group(3)} | {rs} |")
                else:
                    done, _ = wait_log(mlog, "Synchronization with replica", mark)
                    size = int(re.search(r"\((\d+) bytes\)", done).group(1))
                    secs = ts(done) - ts(saved)
                    print(f"| {run} | TCP | — | {secs:.2f} | {size / 1e6 / secs:.0f} | — | — |")
                r.kill(); r.wait()
    finally:
        master.kill(); master.wait()
        subprocess.run(["rm", "-rf", root])


if __name__ == "__main__":
    main()
