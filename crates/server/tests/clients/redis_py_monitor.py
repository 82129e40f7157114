"""redis-py's monitor() against a server on 127.0.0.1:<port>, over RESP2
and RESP3: the commands another connection sends come back parsed by
redis-py's own line parser (time, db, client address and port, type,
command text), a script's calls as client type "lua"."""
import sys
import time

import redis

port = int(sys.argv[1])

for protocol in (2, 3):
    watcher = redis.Redis(port=port, protocol=protocol)
    other = redis.Redis(port=port, protocol=protocol, db=2)
    other.ping()
    with watcher.monitor() as m:
        t0 = time.time()
        other.set("mon:py", b'va"l\n\x00')
        other.get("mon:py")
        other.eval("return redis.call('get', KEYS[1])", 1, "mon:py")
        seen = [m.next_command() for _ in range(4)]
        t1 = time.time()
    expected = [
        ("tcp", 2, 'SET mon:py va"l\\n\\x00'),
        ("tcp", 2, "GET mon:py"),
        ("tcp", 2, "EVAL return redis.call('get', KEYS[1]) 1 mon:py"),
        ("lua", 2, "get mon:py"),
    ]
    got = [(c["client_type"], c["db"], c["command"]) for c in seen]
    assert got == expected, (protocol, got)
    for c in seen:
        assert t0 - 1 <= c["time"] <= t1 + 1, (protocol, c)
        if c["client_type"] == "tcp":
            assert c["client_address"] == "127.0.0.1", c
            assert c["client_port"].isdigit(), c
    watcher.close()
    other.close()
    print(f"RESP{protocol}: {len(seen)} commands parsed")

print("monitor: OK")
