"""redis-py's RedisCluster writing and reading through a resharding.

Arguments: a node's port, a path whose creation means "the resharding is
over".

Writes `key:{i}` = `v{i}` through `RedisCluster` (which follows -MOVED and
-ASK), and after every write reads back an earlier acknowledged key, so
reads also cross slots while they move. Once the stop file exists it makes
200 more writes, then reads back every acknowledged write. Prints one line
of figures; exits 1 on a lost or wrong value, or when nothing got through.
"""

import os
import sys
import time

import redis
from redis.cluster import RedisCluster

port = int(sys.argv[1])
stop_file = sys.argv[2]

rc = RedisCluster(host="127.0.0.1", port=port, socket_timeout=5.0)
acked = []
errors = 0
wrong_reads = 0
after_stop = 0
i = 0
deadline = time.time() + 900
while time.time() < deadline:
    key = f"key:{i}"
    try:
        if rc.set(key, f"v{i}"):
            acked.append(i)
    except redis.RedisError as e:
        errors += 1
        if errors < 5:
            print(f"write error: {e!r}", file=sys.stderr)
    if acked:
        j = acked[(i * 7919) % len(acked)]
        try:
            if rc.get(f"key:{j}") != f"v{j}".encode():
                wrong_reads += 1
        except redis.RedisError as e:
            errors += 1
            if errors < 5:
                print(f"read error: {e!r}", file=sys.stderr)
    i += 1
    if os.path.exists(stop_file):
        after_stop += 1
        if after_stop >= 200:
            break

lost = [j for j in acked if rc.get(f"key:{j}") != f"v{j}".encode()]
print(
    f"cluster client: acked={len(acked)} lost={len(lost)} "
    f"wrong_reads={wrong_reads} errors={errors}"
)
if lost or wrong_reads or len(acked) < 1000 or after_stop < 200:
    print(f"lost: {lost[:10]}", file=sys.stderr)
    sys.exit(1)
print("cluster client: OK")
