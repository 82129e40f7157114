#!/usr/bin/env python3
"""The RDMA full sync's tunable grid swept, beside the tuner (docs/rdma.md
"Autotuning", docs/benchmarks.md), in one run on the same master:

    python3 scripts/bench_rdma_tune.py [--bin target/release/ferrokv-server]
        [--mib 256] [--endpoints 1,2,3,4] [--slots 2,8,32]
        [--chunks 256kb,1mb,2mb,4mb] [--rounds 2] [--syncs 24]
        [--parts endpoints,grid,tuner,window] [--window-chunk 512kb]

1. Endpoints: N = 1..4 at the defaults (K 8, C 2 MiB), `--rounds` rounds
   interleaved.
2. The grid: every N x K x C cell of the given lists (a subset of the
   tuner's grid, within its default 64 MiB budget), once per round.
3. The tuner: a replica with `rdma-autotune yes`, cold (starting from the
   defaults), `--syncs` full syncs in a row; then the same replica
   restarted (a warm start from its state file) and `--syncs` more.
4. (`window`) The master's tuning of writes in flight within each
   transfer, off and on, rounds interleaved.

Every figure is the replica's own: the snapshot's bytes over the seconds
from the first connect to the last byte verified (its log line "MASTER <->
REPLICA sync: ... over RDMA ..."), the quantity the tuner maximises.

Loopback only: libfabric's tcp provider is TCP underneath, so this ranks
settings on this machine's code paths and kernel; a verbs NIC has its own
best cell, which is why the tuner exists.
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rdma_sync import VALUE, Proc, cmd, fill, info_field  # noqa: E402

SYNC_LINE = re.compile(r"over RDMA \((\d+) endpoint\(s\), K = (\d+), C = (\d+)\) in ([\d.]+)s \(([\d.]+) MB/s\)")


def parse_size(s):
    s = s.lower()
    for suffix, mult in (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30)):
        if s.endswith(suffix):
            return int(s[: -len(suffix)]) * mult
    return int(s)


def wait_synced(replica, keys, mark):
    """Until the link is up with every key and a new sync line is in the
    log; returns (N, K, C, MB/s) of that sync, or None if it was not over
    RDMA."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            up = info_field(replica.port, "replication", "master_link_status") == "up"
            if up and int(cmd(replica.port, "DBSIZE")[1:].strip() or 0) >= keys:
                break
        except OSError:
            pass
        time.sleep(0.01)
    else:
        sys.exit(f"replica {replica.port} did not sync")
    for line in replica.lines()[mark:]:
        m = SYNC_LINE.search(line)
        if m:
            n, k, c, _, mbps = m.groups()
            return int(n), int(k), int(c), float(mbps)
    return None


def full_sync(replica, master, keys):
    """A full sync from `master`: the replica leaves (if it follows),
    diverges with a write of its own under its new replication id, and
    comes back, so PSYNC cannot continue."""
    mark = len(replica.lines())
    cmd(replica.port, "REPLICAOF", "NO", "ONE")
    cmd(replica.port, "SET", "diverged", "1")
    cmd(replica.port, "REPLICAOF", "127.0.0.1", master.port)
    return wait_synced(replica, keys, mark)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/ferrokv-server")
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--endpoints", default="1,2,3,4")
    ap.add_argument("--slots", default="2,8,32")
    ap.add_argument("--chunks", default="256kb,1mb,2mb,4mb")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--syncs", type=int, default=24)
    ap.add_argument("--parts", default="endpoints,grid,tuner",
                    help="which parts to run: endpoints, grid, tuner, window")
    ap.add_argument("--window-chunk", default="512kb",
                    help="chunk size of the 'window' part (more chunks, more windows)")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="bench-rdma-tune-")
    procs = []
    keys = a.mib // 64
    values = [os.urandom(VALUE) for _ in range(keys)]

    def start(name, extra):
        d = os.path.join(root, name)
        os.mkdir(d)
        p = Proc(a.bin, d, extra)
        procs.append(p)
        return p

    def replica_run(name, extra):
        r = start(name, ["--replica-rdma", "yes"] + extra)
        got = full_sync(r, master, keys)
        r.stop()
        shutil.rmtree(r.dir, ignore_errors=True)
        return got

    try:
        master = start("master", ["--rdma-bind", "127.0.0.1", "--rdma-port", "0",
                                  "--repl-diskless-sync", "no"])
        fill(master.port, a.mib, values)
        print(f"# RDMA full sync tuning, {a.mib} MiB snapshot, tcp provider on loopback\n")

        parts = a.parts.split(",")
        ns = [int(x) for x in a.endpoints.split(",")]
        default = None
        # 1. Endpoints at the defaults.
        if "endpoints" in parts:
            endpoints_part(a, ns, replica_run)
        if "window" in parts:
            window_part(a, master, replica_run)
        if "grid" not in parts and "tuner" not in parts:
            return
        # 2. The grid.
        cells = [(n, int(k), parse_size(c))
                 for n in ns for k in a.slots.split(",") for c in a.chunks.split(",")]
        cells = [cell for cell in cells if cell[0] * cell[1] * cell[2] <= 64 << 20]
        best = q1 = None
        if "grid" in parts:
            best, q1, default = grid_part(a, cells, replica_run)
        if "tuner" not in parts:
            return
        tuner_part(a, start, master, keys, best, q1, default)
    finally:
        for p in procs:
            if p.p.poll() is None:
                p.stop()
        shutil.rmtree(root, ignore_errors=True)


def endpoints_part(a, ns, replica_run):
    """N = 1..4 at the defaults, rounds interleaved (the order reversed
    every other round)."""
    print("## Endpoints (K 8, C 2 MiB), MB/s per round, median\n")
    print("| N | rounds | median MB/s |")
    print("|---|---|---|")
    per_n = {n: [] for n in ns}
    for rnd in range(a.rounds):
        order = ns if rnd % 2 == 0 else list(reversed(ns))
        for n in order:
            got = replica_run(f"n{n}-{rnd}", ["--rdma-sync-endpoints", str(n)])
            per_n[n].append(got[3] if got else float("nan"))
    for n in ns:
        xs = per_n[n]
        print(f"| {n} | {', '.join(f'{x:.0f}' for x in xs)} | {statistics.median(xs):.0f} |")


def window_part(a, master, replica_run):
    """The master's writes-in-flight tuner within each transfer, off and on
    (`CONFIG SET rdma-autotune` on the master), rounds interleaved."""
    print(f"\n## Writes in flight tuned within the transfer (master rdma-autotune), "
          f"K 8, C {a.window_chunk}\n")
    print("| master rdma-autotune | MB/s per round | median | W at the end (last round) |")
    print("|---|---|---|---|")
    runs = {"no": [], "yes": []}
    last_w = {}
    for rnd in range(a.rounds):
        for mode in (("no", "yes") if rnd % 2 == 0 else ("yes", "no")):
            cmd(master.port, "CONFIG", "SET", "rdma-autotune", mode)
            got = replica_run(f"w{mode}-{rnd}", ["--rdma-chunk-size", a.window_chunk])
            runs[mode].append(got[3] if got else float("nan"))
            last_w[mode] = info_field(master.port, "rdma", "rdma_tune_writes_in_flight")
    for mode in ("no", "yes"):
        xs = runs[mode]
        w = last_w.get(mode, "") if mode == "yes" else "8 (K)"
        print(f"| {mode} | {', '.join(f'{x:.0f}' for x in xs)} | {statistics.median(xs):.0f} | {w} |")
    cmd(master.port, "CONFIG", "SET", "rdma-autotune", "no")
    print("\nwindows learned over the run:", info_field(master.port, "rdma", "rdma_tune_transfer_windows"))


def grid_part(a, cells, replica_run):
    """Every cell once per round; returns (best median, the worst
    quartile's upper bound, the defaults' median or None)."""
    grid = {cell: [] for cell in cells}
    for rnd in range(a.rounds):
        order = cells if rnd % 2 == 0 else list(reversed(cells))
        for (n, k, c) in order:
            got = replica_run(f"g{n}-{k}-{c}-{rnd}", ["--rdma-sync-endpoints", str(n),
                                                     "--rdma-ring-slots", str(k),
                                                     "--rdma-chunk-size", str(c)])
            grid[(n, k, c)].append(got[3] if got else float("nan"))
    medians = {cell: statistics.median(xs) for cell, xs in grid.items()}
    ranked = sorted(medians.items(), key=lambda kv: -kv[1])
    print(f"\n## Grid ({len(cells)} cells within 64 MiB pinned, {a.rounds} rounds), best first\n")
    print("| N | K | C | median MB/s |")
    print("|---|---|---|---|")
    for (n, k, c), v in ranked:
        print(f"| {n} | {k} | {c >> 10} KiB | {v:.0f} |")
    vals = sorted(medians.values())
    best = vals[-1]
    q1 = vals[len(vals) // 4]
    default = medians.get((1, 8, 2 << 20))
    print(f"\nbest cell {best:.0f} MB/s; worst quartile's upper bound {q1:.0f} MB/s"
          + (f"; defaults (1, 8, 2 MiB) {default:.0f} MB/s" if default else ""))
    return best, q1, default


def tuner_part(a, start, master, keys, best, q1, default):
    """`--syncs` syncs of a tuned replica from a cold start, then as many
    after a restart (warm, from its state file)."""
    args = ["--replica-rdma", "yes", "--rdma-autotune", "yes"]
    tuned = start("tuned", args)
    runs = {"cold": [], "warm": []}
    for phase in ("cold", "warm"):
        if phase == "warm":
            tuned.stop()
            tuned = Proc(a.bin, tuned.dir, args)
        for _ in range(a.syncs):
            got = full_sync(tuned, master, keys)
            if got:
                runs[phase].append(got)
    print(f"\n## Tuner: {a.syncs} syncs cold, then {a.syncs} after a restart (warm)\n")
    print("| phase | sync | N | K | C | MB/s |")
    print("|---|---|---|---|---|---|")
    for phase in ("cold", "warm"):
        for i, (n, k, c, v) in enumerate(runs[phase]):
            print(f"| {phase} | {i + 1} | {n} | {k} | {c >> 10} KiB | {v:.0f} |")
    ratio = lambda v, ref: f"{v / ref:.2f}x" if ref else "n/a"  # noqa: E731
    for phase in ("cold", "warm"):
        xs = [v for (_, _, _, v) in runs[phase]]
        if not xs:
            continue
        last = statistics.median(xs[len(xs) // 2:])
        print(f"\n{phase}: median of all {statistics.median(xs):.0f} MB/s, of the second half "
              f"{last:.0f} MB/s ({ratio(last, best)} the best cell, {ratio(last, q1)} the worst "
              f"quartile's bound, {ratio(last, default)} the defaults); worst sync {min(xs):.0f} MB/s "
              f"({ratio(min(xs), default)} the defaults)")
    print("\ntuner state:", info_field(tuned.port, "rdma", "rdma_tune_converged"),
          "converged;", info_field(tuned.port, "rdma", "rdma_tune_explorations"), "explorations,",
          info_field(tuned.port, "rdma", "rdma_tune_rejections"), "rejections")
    tuned.stop()


if __name__ == "__main__":
    main()
