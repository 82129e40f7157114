"""redis-py pub/sub and transactions against a running server:
`python3 redis_py_pubsub_multi.py <port> <2|3>`.

Uses redis-py the way applications do: `PubSub` objects (subscribe,
psubscribe, get_message, keyspace notifications), `pipeline(transaction=True)`
and the WATCH retry loop of `Redis.transaction`. Prints ALL OK, or exits
non-zero naming the first mismatch.
"""
import sys
import threading
import time

import redis


def check(got, expected, what):
    if got != expected:
        sys.exit(f"{what}: got {got!r}, expected {expected!r}")


def next_message(ps, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = ps.get_message(timeout=0.5)
        if m is not None:
            return m
    sys.exit("no message arrived")


def main(port, protocol):
    pre = f"py{protocol}:"
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True)
    r.flushall()

    # Pub/sub.
    ps = r.pubsub()
    ps.subscribe(pre + "chan")
    check(next_message(ps)["type"], "subscribe", "subscribe confirmation")
    ps.psubscribe(pre + "c*")
    check(next_message(ps)["type"], "psubscribe", "psubscribe confirmation")
    check(r.publish(pre + "chan", "hi"), 2, "PUBLISH receivers")
    m = next_message(ps)
    check((m["type"], m["channel"], m["data"]), ("message", pre + "chan", "hi"), "message")
    m = next_message(ps)
    check((m["type"], m["pattern"], m["data"]), ("pmessage", pre + "c*", "hi"), "pmessage")
    check(r.pubsub_numsub(pre + "chan"), [(pre + "chan", 1)], "PUBSUB NUMSUB")
    check(r.pubsub_numpat(), 1, "PUBSUB NUMPAT")
    ps.unsubscribe()
    ps.punsubscribe()
    ps.close()

    # Keyspace notifications through a PubSub object.
    r.config_set("notify-keyspace-events", "KEA")
    check(r.config_get("notify-keyspace-events"), {"notify-keyspace-events": "AKE"}, "CONFIG GET")
    ks = r.pubsub(ignore_subscribe_messages=True)
    ks.psubscribe("__keyspace@0__:" + pre + "*")
    ks.get_message(timeout=0.5)
    r.set(pre + "k", "1")
    r.incr(pre + "k")
    r.delete(pre + "k")
    events = [next_message(ks)["data"] for _ in range(3)]
    check(events, ["set", "incrby", "del"], "keyspace events")
    ks.close()
    r.config_set("notify-keyspace-events", "")

    # pipeline(transaction=True): MULTI ... EXEC, results in order, a
    # runtime error in its place.
    with r.pipeline(transaction=True) as p:
        p.set(pre + "a", "1").incr(pre + "a").get(pre + "a")
        check(p.execute(), [True, 2, "2"], "MULTI/EXEC pipeline")
    with r.pipeline(transaction=True) as p:
        p.set(pre + "s", "text").incr(pre + "s").get(pre + "s")
        res = p.execute(raise_on_error=False)
        check(isinstance(res[1], redis.ResponseError), True, "error inside EXEC")
        check((res[0], res[2]), (True, "text"), "the rest of EXEC ran")

    # WATCH with a concurrent writer: Redis.transaction retries until the
    # watched key stays still; no increment is lost.
    stop = threading.Event()

    def writer():
        w = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
        for _ in range(100):
            w.incr(pre + "counter")
        stop.set()

    t = threading.Thread(target=writer)
    t.start()
    for _ in range(100):
        def add_one(pipe):
            v = int(pipe.get(pre + "counter") or 0)
            pipe.multi()
            pipe.set(pre + "counter", v + 1)

        r.transaction(add_one, pre + "counter")
    t.join()
    check(r.get(pre + "counter"), "200", "WATCH retry loop")

    # A watched key changed by another client aborts with WatchError.
    with r.pipeline(transaction=True) as p:
        p.watch(pre + "w")
        r.set(pre + "w", "changed")
        p.multi()
        p.set(pre + "w", "mine")
        try:
            p.execute()
            sys.exit("EXEC ran although the watched key changed")
        except redis.WatchError:
            pass
    check(r.get(pre + "w"), "changed", "aborted transaction wrote nothing")
    print("ALL OK")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
