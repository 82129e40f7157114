"""redis-py against a running server: `python3 redis_py_smoke.py <port> [--no-setinfo]`.

Exercises what a real application does through redis-py, over RESP2 and
RESP3 (redis-py >= 5 sends CLIENT SETINFO on connect; with protocol=3 it
opens with HELLO 3). Exits non-zero with a message on the first mismatch.
"""
import sys

import redis


def check(got, expected, what):
    if got != expected:
        sys.exit(f"{what}: got {got!r}, expected {expected!r}")


def run(port, protocol, setinfo):
    p = f"py{protocol}:"
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True)
    check(r.ping(), True, "PING")
    check(r.set(p + "k", "v"), True, "SET")
    check(r.get(p + "k"), "v", "GET")
    check(r.get(p + "missing"), None, "GET missing")
    check(r.set(p + "k", "w", nx=True), None, "SET NX on existing")
    check(r.set(p + "k", "w", xx=True, get=True), "v", "SET XX GET")
    check(r.incr(p + "n"), 1, "INCR")
    check(r.incrby(p + "n", 41), 42, "INCRBY")
    check(r.incrbyfloat(p + "f", 1.5), 1.5, "INCRBYFLOAT")
    check(r.mset({p + "a": "1", p + "b": "2"}), True, "MSET")
    check(r.mget(p + "a", p + "b", p + "none"), ["1", "2", None], "MGET")
    check(r.append(p + "a", "23"), 3, "APPEND")
    check(r.getrange(p + "a", 0, 1), "12", "GETRANGE")
    check(r.expire(p + "a", 100), True, "EXPIRE")
    check(r.ttl(p + "a"), 100, "TTL")
    check(r.persist(p + "a"), True, "PERSIST")
    check(r.ttl(p + "a"), -1, "TTL after PERSIST")
    check(r.getex(p + "a", ex=50), "123", "GETEX")
    check(r.exists(p + "a", p + "b", p + "none"), 2, "EXISTS")
    check(r.type(p + "a"), "string", "TYPE")
    check(r.rename(p + "b", p + "c"), True, "RENAME")
    check(r.copy(p + "c", p + "d"), True, "COPY")
    check(r.getdel(p + "d"), "2", "GETDEL")
    check(r.delete(p + "c", p + "none"), 1, "DEL")
    check(r.lcs(p + "k", p + "k"), "w", "LCS")
    check(sorted(r.keys(p + "[ab]")), [p + "a"], "KEYS")
    check(sorted(r.scan_iter(match=p + "*", count=2)), sorted(r.keys(p + "*")), "SCAN")
    check(r.object("encoding", p + "n"), "int", "OBJECT ENCODING")
    # Pipelines, transactional or not, come back in order.
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"{p}pipe:{i}", i)
        pipe.get(f"{p}pipe:{i}")
    replies = pipe.execute()
    check(replies, [x for i in range(100) for x in (True, str(i))], "pipeline")
    # Binary-safe values through a client without decoding.
    b = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
    blob = bytes(range(256)) * 4 + b"\r\n\0"
    check(b.set(p.encode() + b"\0bin\r\n", blob), True, "SET binary")
    check(b.get(p.encode() + b"\0bin\r\n"), blob, "GET binary")
    # Connection and server commands.
    check(r.client_setname("smoke"), True, "CLIENT SETNAME")
    check(r.client_getname(), "smoke", "CLIENT GETNAME")
    check(isinstance(r.client_id(), int), True, "CLIENT ID")
    me = [c for c in r.client_list() if c["name"] == "smoke"]
    check(len(me), 1, "CLIENT LIST has this connection")
    check(me[0]["resp"], str(protocol), "CLIENT LIST resp")
    if setinfo:
        check(me[0].get("lib-name"), "redis-py", "lib-name from CLIENT SETINFO")
    info = r.info()
    check(info["redis_version"], "7.0.15", "INFO redis_version")
    check(info["redis_mode"], "standalone", "INFO redis_mode")
    check(r.info("keyspace")["db0"]["keys"] > 0, True, "INFO keyspace")
    check(r.config_get("maxclients"), {"maxclients": "10000"}, "CONFIG GET")
    check(r.config_set("timeout", 0), True, "CONFIG SET")
    check(r.dbsize() > 0, True, "DBSIZE")
    check(len(r.time()), 2, "TIME")
    check(r.echo("hi"), "hi", "ECHO")
    check(r.command_count() > 50, True, "COMMAND COUNT")
    try:
        r.execute_command("NOSUCHCMD", "a")
        sys.exit("unknown command did not fail")
    except redis.ResponseError as e:
        check(str(e), "unknown command 'NOSUCHCMD', with args beginning with: 'a' ", "unknown command")
    try:
        r.incr(p + "k")
        sys.exit("INCR of a string did not fail")
    except redis.ResponseError as e:
        check(str(e), "value is not an integer or out of range", "INCR error")
    if protocol == 3:
        hello = r.execute_command("HELLO", "3")
        check(hello["proto"], 3, "HELLO 3 proto")
        check(hello["server"], "redis", "HELLO 3 server")
    r.close()
    b.close()


def main():
    port = int(sys.argv[1])
    # Redis 7.0 itself has no CLIENT SETINFO: `--no-setinfo` to run it there.
    setinfo = "--no-setinfo" not in sys.argv[2:]
    for protocol in (2, 3):
        run(port, protocol, setinfo)
    print(f"redis-py {redis.__version__}: OK")


if __name__ == "__main__":
    main()
