//! Files written by our encoder must be accepted by `redis-check-rdb` and
//! load into a real Redis 7.0 with exactly the data we wrote — and what that
//! Redis saves back must decode to the same data. Guards against an encoder
//! that only round-trips through its own decoder.
//!
//! Needs `redis-server` and `redis-check-rdb` (Debian's redis-server and
//! redis-tools 7.0.x) on PATH; the tests fail loudly if they are missing.

mod common;
use common::lcg_bytes;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferrokv_rdb::consts::*;
use ferrokv_rdb::{
    Dataset, EncoderOptions, EncodingLimits, OrderedScore, OwnedEntry, OwnedValue, RdbEncoder,
};

const FAR_FUTURE_MS: i64 = 4_102_444_800_123;

fn require_tool(name: &str) {
    let ok = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{name} is not installed: these tests need Redis 7.0 (apt-get install redis-server redis-tools)"
    );
}

/// A private redis-server on a free loopback port, killed on drop.
struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    fn start(dir: &Path, dbfilename: &str) -> RedisServer {
        require_tool("redis-server");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir)
            .args([
                "--dbfilename",
                dbfilename,
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args([
                "--enable-debug-command",
                "yes",
                "--enable-protected-configs",
                "yes",
            ])
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            // Still loading answers -LOADING; wait for a real PONG.
            if server.pings() {
                break;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
                panic!("redis-server exited with {status} while starting; log:\n{log}");
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn try_connect(&self) -> std::io::Result<Client> {
        let s = TcpStream::connect(("127.0.0.1", self.port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Client {
            reader: BufReader::new(s.try_clone()?),
            writer: s,
        })
    }

    /// PING without panicking on connection errors (the server may be
    /// starting or loading).
    fn pings(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    fn client(&self) -> Client {
        self.try_connect().expect("connect to redis-server")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Reply {
    fn bytes(self) -> Vec<u8> {
        match self {
            Reply::Bulk(Some(b)) => b,
            other => panic!("expected a bulk string, got {other:?}"),
        }
    }
    fn int(self) -> i64 {
        match self {
            Reply::Int(i) => i,
            other => panic!("expected an integer, got {other:?}"),
        }
    }
    fn array(self) -> Vec<Vec<u8>> {
        match self {
            Reply::Array(items) => items.into_iter().map(Reply::bytes).collect(),
            other => panic!("expected an array, got {other:?}"),
        }
    }
}

/// Just enough RESP2 to talk to redis-server.
struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    fn cmd(&mut self, args: &[&[u8]]) -> Reply {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&req).unwrap();
        self.read()
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.reader.read_line(&mut l).unwrap();
        assert!(l.ends_with("\r\n"), "bad reply line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> Reply {
        let l = self.line();
        let (kind, rest) = l.split_at(1);
        match kind {
            "+" => Reply::Simple(rest.into()),
            "-" => Reply::Error(rest.into()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Bulk(None);
                }
                let mut buf = vec![0; n as usize + 2];
                self.reader.read_exact(&mut buf).unwrap();
                buf.truncate(n as usize);
                Reply::Bulk(Some(buf))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                Reply::Array((0..n.max(0)).map(|_| self.read()).collect())
            }
            _ => panic!("unexpected reply {l:?}"),
        }
    }
}

type Model = BTreeMap<u64, BTreeMap<Vec<u8>, (OwnedValue, Option<i64>)>>;

/// Every type, in compact and full encodings under default limits, with
/// binary data, integers, compressible and incompressible strings, expiries,
/// and two databases.
fn model() -> Model {
    let s = |v: &[u8]| OwnedValue::String(v.to_vec());
    let list = |v: Vec<Vec<u8>>| OwnedValue::List(v);
    let set = |v: Vec<Vec<u8>>| OwnedValue::Set(v.into_iter().collect::<BTreeSet<_>>());
    let zset = |v: Vec<(Vec<u8>, f64)>| {
        OwnedValue::SortedSet(v.into_iter().map(|(m, x)| (m, OrderedScore(x))).collect())
    };
    let hash = |v: Vec<(Vec<u8>, Vec<u8>)>| OwnedValue::Hash(v.into_iter().collect());
    let mut db0: BTreeMap<Vec<u8>, (OwnedValue, Option<i64>)> = BTreeMap::new();
    let mut put = |k: &[u8], v: OwnedValue, exp: Option<i64>| {
        db0.insert(k.to_vec(), (v, exp));
    };
    put(b"str:int", s(b"12345"), None);
    put(b"str:neg", s(b"-2147483648"), None);
    put(b"str:bigint", s(b"9223372036854775807"), None);
    put(b"str:leading-zero", s(b"007"), None);
    put(b"str:empty", s(b""), None);
    put(b"str:bin", s(b"a\x00b\r\nc\xff\r\n"), Some(FAR_FUTURE_MS));
    put(b"str:lzf", s(&b"abc".repeat(400)), None);
    put(b"str:random", s(&lcg_bytes(300, 7)), None);
    put(
        b"str:large",
        s(&(0..20000)
            .flat_map(|i| format!("line {i}\r\n").into_bytes())
            .collect::<Vec<_>>()),
        None,
    );
    put(b"\x00bin\r\nkey", s(b"binary key"), None);
    put(
        b"list:small",
        list(vec![
            b"a".to_vec(),
            b"1".to_vec(),
            b"-2".to_vec(),
            b"x\r\n\x00".to_vec(),
            b"".to_vec(),
        ]),
        Some(FAR_FUTURE_MS + 5),
    );
    let mut big: Vec<Vec<u8>> = (0..3000)
        .map(|i| format!("item-{i}").into_bytes())
        .collect();
    big.insert(1500, vec![b'L'; 20000]);
    big.push(lcg_bytes(5000, 3));
    put(b"list:big", list(big), None);
    put(
        b"set:ints",
        set(["1", "2", "3", "-100", "70000"]
            .map(|x| x.as_bytes().to_vec())
            .to_vec()),
        None,
    );
    put(
        b"set:ints64",
        set(vec![
            b"1".to_vec(),
            b"5000000000".to_vec(),
            b"-9223372036854775808".to_vec(),
        ]),
        None,
    );
    put(
        b"set:strs",
        set(vec![
            b"a".to_vec(),
            b"b".to_vec(),
            b"c\x00".to_vec(),
            b"01".to_vec(),
        ]),
        None,
    );
    put(
        b"set:bigints",
        set((0..600).map(|i| (i * 7).to_string().into_bytes()).collect()),
        Some(FAR_FUTURE_MS),
    );
    put(
        b"zset:small",
        zset(vec![
            (b"a".to_vec(), 1.0),
            (b"b".to_vec(), 2.5),
            (b"c".to_vec(), f64::NEG_INFINITY),
            (b"d".to_vec(), f64::INFINITY),
            (b"e".to_vec(), 0.1),
            (b"f".to_vec(), -3.0),
            (b"g".to_vec(), 1e300),
            (b"h".to_vec(), 2.5),
            (b"123".to_vec(), -1.25e-10),
        ]),
        None,
    );
    put(
        b"zset:big",
        zset(
            (0..200)
                .map(|i| (format!("m{i}").into_bytes(), i as f64 * 1.5 - 7.0))
                .collect(),
        ),
        None,
    );
    put(
        b"zset:longmember",
        zset(vec![(vec![b'x'; 100], 1.0), (b"y".to_vec(), 2.0)]),
        Some(FAR_FUTURE_MS + 1),
    );
    put(
        b"hash:small",
        hash(vec![
            (b"f1".to_vec(), b"v1".to_vec()),
            (b"f2".to_vec(), b"2".to_vec()),
            (b"bin\x00".to_vec(), b"\r\n".to_vec()),
            (b"-7".to_vec(), b"".to_vec()),
        ]),
        Some(FAR_FUTURE_MS),
    );
    put(
        b"hash:big",
        hash(
            (0..600)
                .map(|i| {
                    (
                        format!("field{i}").into_bytes(),
                        format!("value{i}").into_bytes(),
                    )
                })
                .collect(),
        ),
        None,
    );
    put(
        b"hash:longval",
        hash(vec![
            (b"f".to_vec(), vec![b'v'; 100]),
            (b"g".to_vec(), b"1".to_vec()),
        ]),
        None,
    );
    let mut db3 = BTreeMap::new();
    db3.insert(b"db3:str".to_vec(), (s(b"in db three"), None));
    db3.insert(
        b"db3:list".to_vec(),
        (
            list(vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]),
            Some(FAR_FUTURE_MS),
        ),
    );
    BTreeMap::from([(0, db0), (3, db3)])
}

fn encode_model(model: &Model, options: EncoderOptions) -> Vec<u8> {
    let mut enc = RdbEncoder::new(options);
    // Several chunks, as the snapshotting loop produces them.
    let mut chunks: Vec<Vec<u8>> = vec![Vec::new()];
    enc.header(
        &mut chunks[0],
        &[
            (b"redis-ver", b"7.0.15"),
            (b"redis-bits", b"64"),
            (b"ctime", b"1700000000"),
            (b"aof-base", b"0"),
        ],
    );
    for (db, keys) in model {
        let mut chunk = Vec::new();
        enc.select_db(&mut chunk, *db);
        let expires = keys.values().filter(|(_, e)| e.is_some()).count() as u64;
        enc.resize_db(&mut chunk, keys.len() as u64, expires);
        for (k, (v, exp)) in keys {
            match v {
                OwnedValue::String(s) => enc.string_entry(&mut chunk, k, s, *exp),
                OwnedValue::List(l) => enc.list_entry(&mut chunk, k, l, *exp),
                OwnedValue::Set(s) => enc.set_entry(&mut chunk, k, s, *exp),
                OwnedValue::SortedSet(z) => {
                    enc.zset_entry(&mut chunk, k, z.iter().rev().map(|(m, s)| (m, s.0)), *exp)
                }
                OwnedValue::Hash(h) => enc.hash_entry(&mut chunk, k, h, *exp),
                OwnedValue::HashWithTtls(_) => panic!("Redis 7.0 holds no field TTLs"),
                OwnedValue::Stream(st) => enc.stream_entry(&mut chunk, k, st, *exp),
            }
            if chunk.len() > 4096 {
                chunks.push(std::mem::take(&mut chunk));
            }
        }
        chunks.push(chunk);
    }
    let mut last = Vec::new();
    enc.finish(&mut last);
    chunks.push(last);
    chunks.concat()
}

fn check_rdb(path: &Path) {
    require_tool("redis-check-rdb");
    let out = Command::new("redis-check-rdb")
        .arg(path)
        .output()
        .expect("run redis-check-rdb");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("RDB looks OK"),
        "redis-check-rdb rejected {}:\n{text}",
        path.display()
    );
}

/// Reads every key of `model` back from Redis and compares.
fn assert_redis_holds(c: &mut Client, model: &Model) {
    for (db, keys) in model {
        assert_eq!(
            c.cmd(&[b"SELECT", db.to_string().as_bytes()]),
            Reply::Simple("OK".into())
        );
        assert_eq!(
            c.cmd(&[b"DBSIZE"]).int(),
            keys.len() as i64,
            "DBSIZE of db {db}"
        );
        for (k, (want, exp)) in keys {
            let name = k.escape_ascii().to_string();
            let got = match want {
                OwnedValue::String(_) => OwnedValue::String(c.cmd(&[b"GET", k]).bytes()),
                OwnedValue::List(_) => {
                    OwnedValue::List(c.cmd(&[b"LRANGE", k, b"0", b"-1"]).array())
                }
                OwnedValue::Set(_) => {
                    OwnedValue::Set(c.cmd(&[b"SMEMBERS", k]).array().into_iter().collect())
                }
                OwnedValue::SortedSet(_) => {
                    let flat = c.cmd(&[b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"]).array();
                    let pairs: Vec<(Vec<u8>, f64)> = flat
                        .chunks(2)
                        .map(|p| {
                            (
                                p[0].clone(),
                                String::from_utf8_lossy(&p[1]).parse::<f64>().unwrap(),
                            )
                        })
                        .collect();
                    // ZRANGE order is the sorted-set order: check it too.
                    let mut sorted = pairs.clone();
                    sorted.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then(a.0.cmp(&b.0)));
                    assert_eq!(pairs, sorted, "ZRANGE order of {name}");
                    OwnedValue::SortedSet(
                        pairs
                            .into_iter()
                            .map(|(m, s)| (m, OrderedScore(s)))
                            .collect(),
                    )
                }
                OwnedValue::Stream(_) => panic!("streams are checked by their own test"),
                OwnedValue::HashWithTtls(_) => panic!("Redis 7.0 holds no field TTLs"),
                OwnedValue::Hash(_) => {
                    let flat = c.cmd(&[b"HGETALL", k]).array();
                    OwnedValue::Hash(
                        flat.chunks(2)
                            .map(|p| (p[0].clone(), p[1].clone()))
                            .collect(),
                    )
                }
            };
            assert!(&got == want, "value of db {db} key {name} differs in Redis");
            let pexpiretime = c.cmd(&[b"PEXPIRETIME", k]).int();
            assert_eq!(pexpiretime, exp.unwrap_or(-1), "PEXPIRETIME of {name}");
        }
    }
}

fn encoding_of(c: &mut Client, db: u64, key: &[u8]) -> String {
    c.cmd(&[b"SELECT", db.to_string().as_bytes()]);
    String::from_utf8(c.cmd(&[b"OBJECT", b"ENCODING", key]).bytes()).unwrap()
}

/// Writes `model` with `options`, checks it with redis-check-rdb, loads it
/// into Redis, compares, then has Redis save it and decodes that file.
fn interop_roundtrip(
    model: &Model,
    options: EncoderOptions,
) -> (RedisServer, Client, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let rdb = encode_model(model, options);
    let path = dir.path().join("ours.rdb");
    std::fs::write(&path, &rdb).unwrap();
    check_rdb(&path);

    let server = RedisServer::start(dir.path(), "ours.rdb");
    let mut c = server.client();
    let info = String::from_utf8(c.cmd(&[b"INFO", b"persistence"]).bytes()).unwrap();
    assert!(info.contains("loading:0"), "{info}");
    assert_redis_holds(&mut c, model);

    // Redis's own save of what it loaded decodes back to the same data.
    assert_eq!(
        c.cmd(&[b"CONFIG", b"SET", b"dbfilename", b"theirs.rdb"]),
        Reply::Simple("OK".into())
    );
    assert_eq!(c.cmd(&[b"SAVE"]), Reply::Simple("OK".into()));
    let theirs = std::fs::read(dir.path().join("theirs.rdb")).unwrap();
    let (ds, summary) = Dataset::from_rdb(&theirs).unwrap();
    assert_eq!(summary.version, 10);
    let back: Model = ds
        .dbs
        .into_iter()
        .map(|(db, keys)| {
            let keys = keys
                .into_iter()
                .map(
                    |(
                        k,
                        OwnedEntry {
                            value, expire_ms, ..
                        },
                    )| (k, (value, expire_ms)),
                )
                .collect();
            (db, keys)
        })
        .collect();
    assert!(
        &back == model,
        "Redis's re-save of our file decodes to different data"
    );
    (server, c, path, dir)
}

#[test]
fn encoder_output_passes_redis_check_rdb_and_loads_into_redis_7_0() {
    let model = model();
    let (_server, mut c, _, _dir) = interop_roundtrip(&model, EncoderOptions::default());
    // Redis kept the encodings we chose: no conversion on load.
    for (key, want) in [
        (&b"list:small"[..], "quicklist"),
        (b"set:ints", "intset"),
        (b"set:strs", "hashtable"),
        (b"set:bigints", "hashtable"),
        (b"zset:small", "listpack"),
        (b"zset:big", "skiplist"),
        (b"hash:small", "listpack"),
        (b"hash:big", "hashtable"),
        (b"hash:longval", "hashtable"),
        (b"str:int", "int"),
    ] {
        assert_eq!(encoding_of(&mut c, 0, key), want, "{}", key.escape_ascii());
    }
}

#[test]
fn tiny_limits_plain_nodes_and_no_compression_load_into_redis_7_0() {
    // Forces the full encodings on small values, one-element and PLAIN list
    // nodes, uncompressed strings and a disabled checksum.
    let options = EncoderOptions {
        compression: false,
        checksum: false,
        limits: EncodingLimits {
            hash_max_listpack_entries: 2,
            hash_max_listpack_value: 8,
            zset_max_listpack_entries: 2,
            zset_max_listpack_value: 8,
            set_max_intset_entries: 2,
            list_max_listpack_size: 3,
            list_packed_threshold: 1000,
        },
        ..EncoderOptions::default()
    };
    let model = model();
    let rdb = encode_model(&model, options.clone());
    assert_eq!(&rdb[rdb.len() - 8..], &[0; 8]);
    let (ds, _) = Dataset::from_rdb(&rdb).unwrap();
    assert_eq!(ds.get(0, b"hash:small").unwrap().rdb_type, TYPE_HASH);
    assert_eq!(ds.get(0, b"zset:small").unwrap().rdb_type, TYPE_ZSET_2);
    assert_eq!(ds.get(0, b"set:ints").unwrap().rdb_type, TYPE_SET);
    let plain_marker = [0x01u8, 0x80, 0, 0, 0x4e, 0x20]; // PLAIN container, 32-bit length 20000
    assert!(
        rdb.windows(plain_marker.len()).any(|w| w == plain_marker),
        "no PLAIN node written"
    );
    interop_roundtrip(&model, options);
}

/// Builds a stream with every part of the format in a real Redis: nodes
/// split by small node limits, deleted entries, integer and long values,
/// several field sets, two groups with consumers, pending and acknowledged
/// entries, an unknown `entries_read`.
fn redis_stream(c: &mut Client, key: &[u8]) {
    for cfg in [
        &[&b"CONFIG"[..], b"SET", b"stream-node-max-entries", b"7"][..],
        &[b"CONFIG", b"SET", b"rdbcompression", b"no"],
    ] {
        assert_eq!(c.cmd(cfg), Reply::Simple("OK".into()));
    }
    let long = lcg_bytes(300, 9);
    for i in 0..40u32 {
        let id = format!("{}-{}", 1000 + i / 3, i % 3);
        let v = i.to_string();
        let args: Vec<&[u8]> = match i % 4 {
            0 => vec![
                b"XADD",
                key,
                id.as_bytes(),
                b"f1",
                v.as_bytes(),
                b"f2",
                b"x",
            ],
            1 => vec![
                b"XADD",
                key,
                id.as_bytes(),
                b"f1",
                v.as_bytes(),
                b"f2",
                &long,
            ],
            2 => vec![b"XADD", key, id.as_bytes(), b"other", b"-12345678901"],
            _ => vec![
                b"XADD",
                key,
                id.as_bytes(),
                b"f1",
                b"",
                b"f2",
                b"y",
                b"f3",
                b"z",
            ],
        };
        assert!(matches!(c.cmd(&args), Reply::Bulk(Some(_))));
    }
    for id in [&b"1001-1"[..], b"1002-0", b"1005-2", b"1013-0"] {
        assert_eq!(c.cmd(&[b"XDEL", key, id]).int(), 1);
    }
    for args in [
        &[&b"XGROUP"[..], b"CREATE", key, b"g1", b"0"][..],
        &[b"XGROUP", b"CREATE", key, b"g2", b"1003-0"],
        &[b"XGROUP", b"CREATECONSUMER", key, b"g2", b"idle"],
        &[
            b"XGROUP",
            b"CREATE",
            key,
            b"g0",
            b"$",
            b"ENTRIESREAD",
            b"40",
        ],
    ] {
        assert!(!matches!(c.cmd(args), Reply::Error(_)));
    }
    c.cmd(&[
        b"XREADGROUP",
        b"GROUP",
        b"g1",
        b"alice",
        b"COUNT",
        b"5",
        b"STREAMS",
        key,
        b">",
    ]);
    c.cmd(&[
        b"XREADGROUP",
        b"GROUP",
        b"g1",
        b"bob",
        b"COUNT",
        b"4",
        b"STREAMS",
        key,
        b">",
    ]);
    c.cmd(&[
        b"XREADGROUP",
        b"GROUP",
        b"g2",
        b"carol",
        b"COUNT",
        b"3",
        b"STREAMS",
        key,
        b">",
    ]);
    assert_eq!(c.cmd(&[b"XACK", key, b"g1", b"1000-0", b"1003-1"]).int(), 2);
    // A claim moves an entry and bumps its delivery count.
    c.cmd(&[b"XCLAIM", key, b"g1", b"bob", b"0", b"1000-1"]);
    // Setting the ID of a group makes its entries_read unknown (-1).
    assert_eq!(
        c.cmd(&[b"XGROUP", b"SETID", key, b"g2", b"1008-0"]),
        Reply::Simple("OK".into())
    );
}

#[test]
fn streams_decode_from_redis_and_our_encoding_is_byte_for_byte_redis_s() {
    let dir = tempfile::tempdir().unwrap();
    let server = RedisServer::start(dir.path(), "theirs.rdb");
    let mut c = server.client();
    redis_stream(&mut c, b"s");
    c.cmd(&[b"XADD", b"empty", b"5-5", b"f", b"v"]);
    c.cmd(&[b"XDEL", b"empty", b"5-5"]);
    assert_eq!(c.cmd(&[b"SAVE"]), Reply::Simple("OK".into()));
    let theirs = std::fs::read(dir.path().join("theirs.rdb")).unwrap();
    let (ds, _) = Dataset::from_rdb(&theirs).unwrap();

    let e = ds.get(0, b"s").unwrap();
    assert_eq!(e.rdb_type, TYPE_STREAM_LISTPACKS_2);
    let OwnedValue::Stream(st) = &e.value else {
        panic!("not a stream: {:?}", e.value)
    };
    assert_eq!(st.length, 36);
    assert_eq!(st.last_id, (1013, 0));
    assert_eq!(st.first_id, Some((1000, 0)));
    assert_eq!(st.max_deleted_entry_id, Some((1013, 0)));
    assert_eq!(st.entries_added, Some(40));
    // 40 entries, 7 per node: six nodes; none emptied by the deletes.
    assert_eq!(st.nodes.len(), 6);
    assert_eq!(st.nodes[0].0, (1000, 0));
    let names: Vec<&[u8]> = st.groups.iter().map(|g| g.name.as_ref()).collect();
    assert_eq!(names, [&b"g0"[..], b"g1", b"g2"]);
    // Created at `$` with ENTRIESREAD 40 (without it, 7.0 leaves it -1).
    assert_eq!(st.groups[0].entries_read, Some(40));
    assert!(st.groups[0].pel.is_empty() && st.groups[0].consumers.is_empty());
    let g1 = &st.groups[1];
    // Its reads crossed deleted entries: Redis no longer knows the count.
    assert_eq!(g1.entries_read, Some(-1));
    // 9 delivered, 2 acknowledged.
    assert_eq!(g1.pel.len(), 7);
    let claimed = g1.pel.iter().find(|p| p.0 == (1000, 1)).unwrap();
    assert_eq!(claimed.2, 2, "XCLAIM counts a delivery");
    let owners: Vec<(&[u8], usize)> = g1
        .consumers
        .iter()
        .map(|c| (c.name.as_ref(), c.pel.len()))
        .collect();
    assert_eq!(owners, [(&b"alice"[..], 3), (b"bob", 4)]);
    let g2 = &st.groups[2];
    assert_eq!(g2.last_id, (1008, 0));
    assert_eq!(g2.entries_read, Some(-1));
    assert_eq!(g2.consumers.len(), 2);
    let empty = ds.get(0, b"empty").unwrap();
    let OwnedValue::Stream(es) = &empty.value else {
        panic!("not a stream")
    };
    assert_eq!((es.length, es.nodes.len(), es.last_id), (0, 0, (5, 5)));

    // Our encoding of what we decoded is Redis's DUMP payload, byte for byte.
    for key in [&b"s"[..], b"empty"] {
        let OwnedValue::Stream(st) = &ds.get(0, key).unwrap().value else {
            panic!("not a stream")
        };
        let mut enc = RdbEncoder::new(EncoderOptions {
            compression: false,
            ..EncoderOptions::default()
        });
        let mut body = Vec::new();
        enc.stream_entry(&mut body, b"", st, None);
        // entry_head wrote the type, then the empty key's length byte.
        assert_eq!(&body[..2], &[TYPE_STREAM_LISTPACKS_2, 0]);
        body.remove(1);
        ferrokv_rdb::dump::seal(&mut body);
        let dumped = c.cmd(&[b"DUMP", key]).bytes();
        assert!(body == dumped, "DUMP of {} differs", key.escape_ascii());
    }

    // And a file we write from it loads into Redis with the same digest
    // and the same XINFO (groups, consumers, PEL included).
    let want_digest = c.cmd(&[b"DEBUG", b"DIGEST-VALUE", b"s"]);
    let want_info = format!("{:?}", c.cmd(&[b"XINFO", b"STREAM", b"s", b"FULL"]));
    let model: Model = ds
        .dbs
        .into_iter()
        .map(|(db, keys)| {
            let keys = keys
                .into_iter()
                .map(|(k, e)| (k, (e.value, e.expire_ms)))
                .collect();
            (db, keys)
        })
        .collect();
    let ours = encode_model(&model, EncoderOptions::default());
    let dir2 = tempfile::tempdir().unwrap();
    let path = dir2.path().join("ours.rdb");
    std::fs::write(&path, &ours).unwrap();
    check_rdb(&path);
    let server2 = RedisServer::start(dir2.path(), "ours.rdb");
    let mut c2 = server2.client();
    assert_eq!(c2.cmd(&[b"DEBUG", b"DIGEST-VALUE", b"s"]), want_digest);
    let got_info = format!("{:?}", c2.cmd(&[b"XINFO", b"STREAM", b"s", b"FULL"]));
    // Seen times and delivery times are absolute: equal after a reload.
    assert_eq!(got_info, want_info);
    assert_eq!(c2.cmd(&[b"XLEN", b"empty"]).int(), 0);
}
