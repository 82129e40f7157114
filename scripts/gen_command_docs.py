#!/usr/bin/env python3
"""Writes crates/server/src/commands/docs_table.rs from a running
redis-server 7.0: every command's `COMMAND DOCS` entry (summary, since,
group, complexity, doc flags, history, the argument tree with its key-spec
indexes, subcommands) with the RESP3 types Redis replies with, and every
command's and subcommand's ACL categories and tips from `COMMAND INFO`.
These are facts about Redis's commands (its src/commands/*.json) that
clients read; ferrokv answers with the same ones for the commands it has.

  redis-server --port 6399 --save '' &
  python3 scripts/gen_command_docs.py --port 6399 > crates/server/src/commands/docs_table.rs

The commands whose forms a newer Redis extended and ferrokv serves as that
version does (NEWER below: ZRANK's WITHSCORE, ...) take their entries from
that server instead (`--newer-port`, Redis 7.4.1 from ../shared/peers):

  ../shared/peers/redis-7.4.1/redis-server --port 6374 --save '' &
  python3 scripts/gen_command_docs.py --port 6399 --newer-port 6374 > ...

tests/command_docs.rs compares the same commands with the same servers.
"""
import argparse
import socket


class Resp3:
    """A RESP3 reader that keeps the reply types (map, set, array, ...)."""

    def __init__(self, sock):
        self.s = sock
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            self.buf += self.s.recv(1 << 20)
        l, self.buf = self.buf.split(b"\r\n", 1)
        return l

    def exact(self, n):
        while len(self.buf) < n + 2:
            self.buf += self.s.recv(1 << 20)
        d, self.buf = self.buf[:n], self.buf[n + 2:]
        return d

    def read(self):
        l = self.line()
        t, rest = l[:1], l[1:]
        if t == b"+":
            return ("simple", rest.decode())
        if t == b"-":
            raise SystemExit(rest.decode())
        if t == b":":
            return ("int", int(rest))
        if t == b"$":
            return ("bulk", self.exact(int(rest)).decode())
        if t == b"_":
            return ("null", None)
        if t in (b"*", b"~"):
            kind = "array" if t == b"*" else "set"
            return (kind, [self.read() for _ in range(int(rest))])
        if t == b"%":
            return ("map", [(self.read(), self.read()) for _ in range(int(rest))])
        raise SystemExit(f"unexpected {l!r}")


def command(sock, rd, *args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    sock.sendall(out)
    return rd.read()


def rust_str(s):
    out = []
    for c in s:
        if c in "\\\"":
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif 32 <= ord(c) < 127:
            out.append(c)
        else:
            out.append("\\u{%x}" % ord(c))
    return '"' + "".join(out) + '"'


def doc_rs(v, depth):
    kind, x = v
    pad = "    " * depth
    if kind == "bulk":
        return f"Doc::Bulk({rust_str(x)})"
    if kind == "simple":
        return f"Doc::Simple({rust_str(x)})"
    if kind == "int":
        return f"Doc::Int({x})"
    if kind in ("array", "set"):
        name = "Arr" if kind == "array" else "Set"
        if not x:
            return f"Doc::{name}(&[])"
        items = ",\n".join(pad + "    " + doc_rs(i, depth + 1) for i in x)
        return f"Doc::{name}(&[\n{items},\n{pad}])"
    if kind == "map":
        if not x:
            return "Doc::Map(&[])"
        items = []
        for k, val in x:
            assert k[0] in ("bulk", "simple"), k
            items.append(f"{pad}    ({rust_str(k[1])}, {doc_rs(val, depth + 1)})")
        return "Doc::Map(&[\n" + ",\n".join(items) + f",\n{pad}])"
    raise SystemExit(f"no Rust form for {kind}")


# Commands and subcommands described as Redis 7.4 describes them
# (crates/server/tests/command_docs.rs reads this list).
NEWER = ["zrank", "zrevrank", "hscan", "xread", "xreadgroup", "waitaof", "client|kill",
         "client|no-touch", "hexpire", "hpexpire", "hexpireat", "hpexpireat", "hpersist",
         "httl", "hpttl", "hexpiretime", "hpexpiretime"]


def fetch(port):
    sock = socket.create_connection(("127.0.0.1", port))
    rd = Resp3(sock)
    hello = dict((k[1], v) for k, v in command(sock, rd, "HELLO", "3")[1])
    version = hello["version"][1]
    docs = command(sock, rd, "COMMAND", "DOCS")[1]
    info = command(sock, rd, "COMMAND", "INFO")[1]
    return version, docs, info


def overlay_docs(docs, newer_docs):
    """The NEWER entries of `newer_docs` in place of (or beside) `docs`'s."""
    by_name = {k[1]: v for k, v in newer_docs}
    out = []
    for k, v in docs:
        name = k[1]
        if name in NEWER:
            v = by_name[name]
        subs_newer = [n for n in NEWER if n.startswith(name + "|")]
        if subs_newer:
            new_subs = dict((sk[1], sv) for sk, sv in
                            dict(by_name[name][1])[("bulk", "subcommands")][1])
            fields = []
            for fk, fv in v[1]:
                if fk[1] == "subcommands":
                    subs = [(sk, new_subs[sk[1]] if sk[1] in subs_newer else sv)
                            for sk, sv in fv[1]]
                    have = {sk[1] for sk, _ in subs}
                    subs += [(("bulk", n), new_subs[n]) for n in subs_newer
                             if n not in have]
                    fv = (fv[0], subs)
                fields.append((fk, fv))
            v = (v[0], fields)
        out.append((k, v))
    have = {k[1] for k, _ in docs}
    out += [(("bulk", n), by_name[n]) for n in NEWER if "|" not in n and n not in have]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--newer-port", type=int, required=True)
    a = ap.parse_args()
    version, docs, info = fetch(a.port)
    newer_version, newer_docs, newer_info = fetch(a.newer_port)
    docs = overlay_docs(docs, newer_docs)
    meta = []

    def walk(entry):
        fields = entry[1]
        name = fields[0][1]
        flags = [f[1] for f in fields[2][1]]
        keys = (fields[3][1], fields[4][1], fields[5][1])
        cats = [c[1] for c in fields[6][1]]
        tips = [t[1] for t in fields[7][1]]
        meta.append((name, flags, keys, cats, tips))
        for sub in fields[9][1]:
            walk(sub)

    for e in info:
        walk(e)
    meta = [m for m in meta if m[0] not in NEWER]
    older = len(meta)
    for e in newer_info:
        walk(e)
    meta = meta[:older] + [m for m in meta[older:] if m[0] in NEWER]
    meta.sort()
    docs = sorted(docs, key=lambda kv: kv[0][1])
    print(f"// Generated by scripts/gen_command_docs.py from redis-server {version}'s")
    print(f"// COMMAND DOCS and COMMAND INFO, and redis-server {newer_version}'s for")
    print(f"// {', '.join(NEWER)};")
    print("// do not edit by hand. Sorted by name.")
    print("use super::docs::{Doc, Meta};")
    print()
    print("/// Each command's `COMMAND DOCS` entry, with Redis's reply types.")
    print("pub static DOCS: &[(&str, Doc)] = &[")
    for k, v in docs:
        print(f"    ({rust_str(k[1])}, {doc_rs(v, 1)}),")
    print("];")
    print()
    print("/// Each command's and subcommand's `COMMAND INFO` flags, legacy key")
    print("/// range, ACL categories and tips.")
    print("pub static META: &[Meta] = &[")
    for name, flags, keys, cats, tips in meta:
        f = ", ".join(rust_str(x) for x in flags)
        c = ", ".join(rust_str(x) for x in cats)
        t = ", ".join(rust_str(x) for x in tips)
        print(f"    Meta {{ name: {rust_str(name)}, flags: &[{f}], keys: {keys}, "
              f"acl: &[{c}], tips: &[{t}] }},")
    print("];")


if __name__ == "__main__":
    main()
