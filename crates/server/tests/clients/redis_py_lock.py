"""redis-py's Lock and Lua scripts against a running server:
`python3 redis_py_lock.py <port>`.

Exercises what applications build on scripting, over RESP2 and RESP3
(protocol=3): redis-py's `Lock` through its whole life (its acquire,
extend, reacquire and release are EVALSHA calls of Lua scripts, with the
SCRIPT LOAD fallback on NOSCRIPT), several threads contending for one lock
around a non-atomic read-modify-write, a Lua token-bucket rate limiter and
a compare-and-delete script run from several threads at once. Every count
is fixed, so a run is a few seconds. Exits non-zero with a message on the
first mismatch.
"""
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError

THREADS = 8


def check(got, expected, what):
    if got != expected:
        sys.exit(f"{what}: got {got!r}, expected {expected!r}")


def expect_raises(exc, fn, what, text=None):
    try:
        fn()
    except exc as e:
        if text is not None:
            check(str(e), text, what)
        return
    except Exception as e:  # noqa: BLE001 - report what else came
        sys.exit(f"{what}: raised {type(e).__name__}: {e}, expected {exc.__name__}")
    sys.exit(f"{what}: did not raise {exc.__name__}")


def lock_life(r, p):
    name = p + "lock"
    lock = r.lock(name, timeout=10, sleep=0.01)
    check(lock.locked(), False, "locked() before acquire")
    check(lock.owned(), False, "owned() before acquire")
    check(lock.acquire(blocking=False), True, "non-blocking acquire of a free lock")
    check(lock.locked(), True, "locked() after acquire")
    check(lock.owned(), True, "owned() after acquire")
    ttl = r.pttl(name)
    check(0 < ttl <= 10000, True, f"PTTL after acquire ({ttl})")
    # Another holder: non-blocking and time-bounded attempts fail.
    # Not thread-local: a timer thread releases it below.
    other = r.lock(name, timeout=10, sleep=0.01, thread_local=False)
    check(other.acquire(blocking=False), False, "non-blocking acquire of a held lock")
    t0 = time.monotonic()
    check(other.acquire(blocking_timeout=0.2), False, "acquire with blocking_timeout")
    waited = time.monotonic() - t0
    check(0.15 <= waited < 5, True, f"blocking_timeout waited ({waited:.3f} s)")
    check(other.owned(), False, "owned() by the other handle")
    check(other.locked(), True, "locked() seen by the other handle")
    # extend: additive, then replacing the TTL.
    check(lock.extend(20), True, "extend(20)")
    ttl = r.pttl(name)
    check(20000 < ttl <= 30000, True, f"PTTL after extend(20) ({ttl})")
    check(lock.extend(5, replace_ttl=True), True, "extend(5, replace_ttl=True)")
    ttl = r.pttl(name)
    check(0 < ttl <= 5000, True, f"PTTL after replace_ttl ({ttl})")
    check(lock.reacquire(), True, "reacquire()")
    ttl = r.pttl(name)
    check(5000 < ttl <= 10000, True, f"PTTL after reacquire ({ttl})")
    # The wrong token cannot release, extend or reacquire.
    other.local.token = b"not-the-token"
    expect_raises(LockNotOwnedError, other.release, "release by the wrong token",
                  "Cannot release a lock that's no longer owned")
    other.local.token = b"not-the-token"
    expect_raises(LockNotOwnedError, lambda: other.extend(1), "extend by the wrong token",
                  "Cannot extend a lock that's no longer owned")
    other.local.token = b"not-the-token"
    expect_raises(LockNotOwnedError, other.reacquire, "reacquire by the wrong token",
                  "Cannot reacquire a lock that's no longer owned")
    check(lock.owned(), True, "still owned after the wrong token's attempts")
    lock.release()
    check(lock.locked(), False, "locked() after release")
    check(r.exists(name), 0, "the key is gone after release")
    expect_raises(LockError, lock.release, "release of an unlocked lock")
    # A blocking acquire waits for the holder's release.
    check(other.acquire(blocking=False), True, "acquire after release")
    threading.Timer(0.2, other.release).start()
    t0 = time.monotonic()
    check(lock.acquire(blocking=True, blocking_timeout=5), True, "blocking acquire")
    check(time.monotonic() - t0 < 5, True, "blocking acquire returned in time")
    lock.release()
    # A lock that expired is someone else's: releasing it raises.
    short = r.lock(name, timeout=0.1, sleep=0.01)
    check(short.acquire(), True, "acquire with a 100 ms timeout")
    time.sleep(0.3)
    check(short.locked(), False, "expired lock is free")
    newer = r.lock(name, timeout=10)
    check(newer.acquire(blocking=False), True, "acquire an expired lock")
    expect_raises(LockNotOwnedError, short.release, "release after expiry")
    check(newer.owned(), True, "the new holder still owns it")
    newer.release()
    # The lock as a context manager, across a SCRIPT FLUSH (NOSCRIPT, then
    # SCRIPT LOAD and EVALSHA again).
    r.script_flush()
    with r.lock(name, timeout=5, blocking_timeout=5) as held:
        check(held.owned(), True, "owned inside `with`")
    check(r.exists(name), 0, "released by `with`")
    # A lock without timeout cannot be extended (redis-py's own check).
    forever = r.lock(name)
    check(forever.acquire(), True, "acquire without timeout")
    check(r.ttl(name), -1, "no TTL without timeout")
    expect_raises(LockError, lambda: forever.extend(1), "extend without timeout")
    forever.release()


def lock_contention(port, protocol, p):
    name = p + "contended"
    counter = p + "counter"
    per_thread = 25
    errors = []
    inside = [0]
    inside_guard = threading.Lock()

    def worker():
        c = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True)
        lock = c.lock(name, timeout=10, sleep=0.001)
        try:
            for _ in range(per_thread):
                if not lock.acquire(blocking=True, blocking_timeout=30):
                    errors.append("acquire timed out")
                    return
                with inside_guard:
                    inside[0] += 1
                    if inside[0] != 1:
                        errors.append(f"{inside[0]} holders at once")
                # Non-atomic on purpose: only the lock makes it safe.
                value = int(c.get(counter) or 0)
                c.set(counter, value + 1)
                with inside_guard:
                    inside[0] -= 1
                lock.release()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{type(e).__name__}: {e}")
        finally:
            c.close()

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(errors, [], "lock contention errors")
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True)
    check(r.get(counter), str(THREADS * per_thread), "counter under the lock")
    check(r.exists(name), 0, "contended lock released")
    r.close()


TOKEN_BUCKET = """
local cap = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or cap
local ts = tonumber(b[2]) or now
if now > ts then
  tokens = math.min(cap, tokens + (now - ts) * rate / 1000)
  ts = now
end
local allowed = 0
if tokens >= want then
  tokens = tokens - want
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', ts)
redis.call('PEXPIRE', KEYS[1], 60000)
return {allowed, tokens}
"""

COMPARE_AND_DELETE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def run_threads(n, target):
    errors = []

    def wrap(i):
        try:
            target(i)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(errors, [], "thread errors")


def rate_limiter(port, protocol, p):
    bucket = p + "bucket"
    cap, rate = 50, 10  # 50 tokens, 10 per second of the callers' clock
    allowed = [0] * THREADS

    def phase(now, per_thread):
        def work(i):
            c = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
            limiter = c.register_script(TOKEN_BUCKET)
            for _ in range(per_thread):
                got, _tokens = limiter(keys=[bucket], args=[cap, rate, now, 1])
                allowed[i] += got
            c.close()

        run_threads(THREADS, work)

    # At one instant, exactly the capacity gets through.
    phase(0, 20)
    check(sum(allowed), cap, "allowed at t=0")
    # One second later, exactly the refill.
    phase(1000, 5)
    check(sum(allowed), cap + rate, "allowed by t=1s")
    # After a long pause the bucket is full again, never fuller.
    phase(3_600_000, 10)
    check(sum(allowed), 2 * cap + rate, "allowed after refilling to the capacity")
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True)
    check(r.hgetall(bucket), {"tokens": "0", "ts": "3600000"}, "bucket state")
    check(0 < r.pttl(bucket) <= 60000, True, "bucket expiry")
    # A fractional refill is kept as Lua's number text.
    limiter = r.register_script(TOKEN_BUCKET)
    check(limiter(keys=[bucket], args=[cap, rate, 3_600_150, 1]), [1, 0], "refill of 1.5 tokens")
    check(r.hget(bucket, "tokens"), "0.5", "half a token left")
    r.close()


def compare_and_delete(port, protocol, p):
    key = p + "cad"
    rounds = 20
    wins = [[] for _ in range(rounds)]
    barrier = threading.Barrier(THREADS + 1)
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
    cad = r.register_script(COMPARE_AND_DELETE)
    sha = cad.sha

    def work(i):
        c = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
        for rnd in range(rounds):
            barrier.wait(30)
            # Half the threads go through EVALSHA, half through EVAL.
            if i % 2:
                got = c.evalsha(sha, 1, key, f"token-{i}")
            else:
                got = c.eval(COMPARE_AND_DELETE, 1, key, f"token-{i}")
            if got == 1:
                wins[rnd].append(i)
            barrier.wait(30)
        c.close()

    def main_side():
        check(r.script_exists(sha), [False], "script not cached before use")
        check(r.script_load(COMPARE_AND_DELETE), sha, "SCRIPT LOAD digest")
        for rnd in range(rounds):
            r.set(key, f"token-{rnd % THREADS}")
            barrier.wait(30)
            barrier.wait(30)
            check(r.exists(key), 0, f"round {rnd}: key deleted")
        check(r.script_exists(sha), [True], "script cached after use")

    r.script_flush()
    t = threading.Thread(target=main_side)
    t.start()
    run_threads(THREADS, work)
    t.join(60)
    check(wins, [[rnd % THREADS] for rnd in range(rounds)], "exactly the owner deleted each round")
    # The wrong token never deletes.
    r.set(key, "mine")
    check(cad(keys=[key], args=["yours"]), 0, "compare-and-delete with the wrong token")
    check(r.get(key), b"mine", "value kept")
    check(cad(keys=[key], args=["mine"]), 1, "compare-and-delete with the right token")
    r.close()


def run(port, protocol):
    p = f"lock{protocol}:"
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
    check(r.ping(), True, "PING")
    lock_life(r, p)
    lock_contention(port, protocol, p)
    rate_limiter(port, protocol, p)
    compare_and_delete(port, protocol, p)
    r.close()


def main():
    port = int(sys.argv[1])
    for protocol in (2, 3):
        run(port, protocol)
    print(f"redis-py {redis.__version__} Lock and scripts: OK")


if __name__ == "__main__":
    main()
