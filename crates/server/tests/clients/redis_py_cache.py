"""redis-py's client-side cache against a server: GETs served from the
cache, invalidated by another connection's write, by a DEL and by FLUSHALL.

redis-py 8 refuses to cache against a server whose HELLO reports a version
below 7.4 (CacheProxyConnection.MIN_ALLOWED_VERSION), whatever it supports;
ferrokv reports 7.0.15, as the Redis it follows. The gate is lowered here,
in this process only, so that the cache itself is exercised. Usage:
redis_py_cache.py PORT
"""
import sys
import time

import redis
from redis.cache import CacheConfig
from redis.connection import CacheProxyConnection

CacheProxyConnection.MIN_ALLOWED_VERSION = "7.0.0"

port = int(sys.argv[1])
cached = redis.Redis(port=port, protocol=3, cache_config=CacheConfig())
writer = redis.Redis(port=port)
cache = cached.get_cache()


def wait_until(what, check):
    deadline = time.time() + 10
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


writer.flushall()
writer.set("csc:a", "1")
assert cached.get("csc:a") == b"1"
assert cache.size == 1, cache.size
# Served from the cache: the server's command count does not move.
before = writer.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
for _ in range(20):
    assert cached.get("csc:a") == b"1"
after = writer.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
assert after == before, (before, after)

# Another connection's write invalidates the cached entry.
writer.set("csc:a", "2")
wait_until("the cached value to be refreshed", lambda: cached.get("csc:a") == b"2")
assert cached.get("csc:a") == b"2"

# A DEL of the key, and FLUSHALL (invalidate with a null).
writer.delete("csc:a")
wait_until("the deleted key to read as missing", lambda: cached.get("csc:a") is None)
writer.set("csc:b", "x")
assert cached.get("csc:b") == b"x"
writer.flushall()
wait_until("FLUSHALL to clear the cache", lambda: cached.get("csc:b") is None)

info = writer.info("clients")
assert info["tracking_clients"] >= 1, info
print("client-side cache: OK")
