"""redis-py's Sentinel client writing through a failover.

Arguments: the sentinels' ports (comma-separated), the master's pid.

Writes keys through `Sentinel(...).master_for()`, each acknowledged only
when `WAIT` says every reachable replica has it (2 before the failover, 1
after: the old master is gone), kills the master with SIGKILL part-way,
keeps writing while the client finds the new master through the
sentinels, and checks that every acknowledged write is on the master the
sentinels name at the end. Prints one line of figures; exits 1 on a lost
write or when the client never got through.
"""

import os
import signal
import sys
import time

import redis
from redis.sentinel import Sentinel

NAME = "mymaster"
BEFORE = 200  # acknowledged writes before the kill
AFTER = 200  # acknowledged writes on the new master

ports = [int(p) for p in sys.argv[1].split(",")]
master_pid = int(sys.argv[2])

sentinel = Sentinel([("127.0.0.1", p) for p in ports], socket_timeout=1.0)
first = sentinel.discover_master(NAME)
master = sentinel.master_for(NAME, socket_timeout=1.0)

acked = {}
errors = 0
killed_at = None
back_at = None
i = 0
deadline = time.time() + 120
while time.time() < deadline:
    if killed_at is None and len(acked) >= BEFORE:
        os.kill(master_pid, signal.SIGKILL)
        killed_at = time.time()
    key = f"sentinel:{i}"
    i += 1
    try:
        master.set(key, i)
        need = 2 if killed_at is None else 1
        got = master.execute_command("WAIT", need, 2000)
    except redis.exceptions.RedisError as e:
        # Refused, timed out, READONLY from a demoted node, no sane master
        # yet: the client retries, and redis-py asks the sentinels again.
        if killed_at is None:
            print(f"error before the kill: {e!r}")
            sys.exit(1)
        errors += 1
        time.sleep(0.05)
        continue
    if got >= need:
        acked[key] = str(i)
    if killed_at is not None:
        if back_at is None:
            back_at = time.time()
        if len(acked) >= BEFORE + AFTER:
            break

now = sentinel.discover_master(NAME)
if back_at is None or now == first:
    print(f"no failover seen: master {first} -> {now}, acked {len(acked)}, errors {errors}")
    sys.exit(1)

check = redis.Redis(host=now[0], port=now[1], socket_timeout=5)
lost = [k for k, v in acked.items() if check.get(k) != v.encode()]
print(
    f"acked={len(acked)} lost={len(lost)} errors={errors} "
    f"failover_seconds={back_at - killed_at:.1f} master={first[1]}->{now[1]}"
)
if lost:
    print("lost:", lost[:20])
    sys.exit(1)
print("sentinel client: OK")
