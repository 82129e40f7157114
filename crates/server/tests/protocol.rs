//! Guards the wire protocol byte for byte: inline and multibulk requests,
//! pipelines, every `-ERR Protocol error: ...` (and that the connection is
//! closed after it), RESP3 reply shapes, and the error texts of unknown
//! commands and wrong arity — each reply exactly as Redis 7.0 sends it.
//!
//! Set `FERROKV_TESTS_TARGET=redis` to run the same assertions against the
//! real `redis-server` (that is how the expected bytes were checked).
mod common;
use common::{Raw, ServerProcess};
use std::sync::Arc;

fn against_redis() -> bool {
    std::env::var("FERROKV_TESTS_TARGET").as_deref() == Ok("redis")
}

/// The server under test, shared by the tests of this file.
fn server() -> Arc<ServerProcess> {
    if against_redis() {
        Arc::new(ServerProcess::redis(&[]))
    } else {
        common::shared_ferrokv()
    }
}

fn start(extra: &[&str]) -> ServerProcess {
    if against_redis() {
        ServerProcess::redis(extra)
    } else {
        ServerProcess::ferrokv(extra)
    }
}

/// Sends `req` and asserts the reply is exactly `expected`, then that the
/// server closed the connection.
fn assert_reply_then_closed(raw: &mut Raw, req: &[u8], expected: &[u8]) {
    raw.send(req);
    let got = raw.read_to_close();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected),
        "request {:?}",
        String::from_utf8_lossy(&req[..req.len().min(60)])
    );
}

#[test]
fn ping_and_echo_inline_and_multibulk() {
    let s = server();
    let mut r = s.raw();
    r.roundtrip(b"PING\r\n", b"+PONG\r\n");
    r.roundtrip(b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n");
    r.roundtrip(b"ping hello\r\n", b"$5\r\nhello\r\n");
    r.roundtrip(b"*2\r\n$4\r\nECHO\r\n$3\r\nabc\r\n", b"$3\r\nabc\r\n");
    r.roundtrip(b"ECHO \xe2\x82\xac\r\n", b"$3\r\n\xe2\x82\xac\r\n");
    // Inline lines may end in a bare \n and carry extra spaces.
    r.roundtrip(b"  PING   \r\n", b"+PONG\r\n");
    r.roundtrip(b"PING\n", b"+PONG\r\n");
}

#[test]
fn inline_commands_unquote_like_redis() {
    let s = server();
    let mut r = s.raw();
    r.roundtrip(b"SET \"proto:a b\" \"c\\x41d\\n\"\r\n", b"+OK\r\n");
    r.roundtrip(b"GET \"proto:a b\"\r\n", b"$4\r\ncAd\n\r\n");
    r.roundtrip(b"ECHO 'it\\'s'\r\n", b"$4\r\nit's\r\n");
    r.roundtrip(b"ECHO \"\\x00\\t\"\r\n", b"$2\r\n\x00\t\r\n");
    r.roundtrip(b"ECHO \"\"\r\n", b"$0\r\n\r\n");
    r.roundtrip(
        b"ECHO 'a\\'b' \"x\"\r\n",
        b"-ERR wrong number of arguments for 'echo' command\r\n",
    );
}

#[test]
fn empty_requests_are_skipped_silently() {
    let s = server();
    let mut r = s.raw();
    r.roundtrip(b"*0\r\n*-1\r\n*-5\r\n\r\n\r\n   \r\nPING\r\n", b"+PONG\r\n");
}

#[test]
fn pipeline_in_one_write_gets_every_reply_in_order() {
    let s = server();
    let mut r = s.raw();
    let mut req = Vec::new();
    req.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$7\r\nproto:p\r\n$1\r\n1\r\n");
    req.extend_from_slice(b"INCR proto:p\r\n");
    req.extend_from_slice(b"*2\r\n$4\r\nINCR\r\n$7\r\nproto:p\r\n");
    req.extend_from_slice(b"GET proto:p\r\n");
    req.extend_from_slice(b"NOSUCH\r\n");
    req.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
    r.roundtrip(
        &req,
        b"+OK\r\n:2\r\n:3\r\n$1\r\n3\r\n-ERR unknown command 'NOSUCH', with args beginning with: \r\n+PONG\r\n",
    );
}

/// A pipeline longer than one of the reactor's warming runs (16
/// commands): a SELECT inside a run, a command past nine arguments (which
/// ends a run), an inline command and key-less ones. Its replies are those
/// of the same commands sent one at a time (which are never warmed).
#[test]
fn a_long_mixed_pipeline_replies_as_its_commands_one_by_one() {
    let s = server();
    let commands = |p: &str| -> Vec<Vec<u8>> {
        let mut cmds: Vec<Vec<String>> = Vec::new();
        for i in 0..10 {
            cmds.push(vec!["SET".into(), format!("{p}:k{i}"), i.to_string()]);
            cmds.push(vec!["INCR".into(), format!("{p}:k{i}")]);
        }
        for c in [
            "SELECT 1",
            "SET {p}:k0 x",
            "GET {p}:k0",
            "SELECT 0",
            "GET {p}:k0",
            "PING",
            "MSET {p}:a 1 {p}:b 2 {p}:c 3 {p}:d 4 {p}:e 5 {p}:f 6",
            "MGET {p}:a {p}:f {p}:k3",
            "SELECT 1",
            "DEL {p}:k0",
            "SELECT 0",
        ] {
            cmds.push(c.replace("{p}", p).split(' ').map(String::from).collect());
        }
        let mut wire: Vec<Vec<u8>> = cmds
            .iter()
            .map(|c| ferrokv_resp::Frame::command(c))
            .collect();
        wire.insert(25, format!("GET {p}:k7\r\n").into_bytes());
        wire
    };
    let mut one = s.raw();
    let singly: Vec<ferrokv_resp::Frame> = commands("proto:w1")
        .iter()
        .map(|c| {
            one.send(c);
            one.read_frame()
        })
        .collect();
    let mut all = s.raw();
    let wire = commands("proto:w2");
    all.send(&wire.concat());
    let piped = all.read_frames(wire.len());
    assert_eq!(piped, singly);
    use ferrokv_resp::Frame;
    // Database 1's key, then database 0's, within one run.
    assert_eq!(piped[22], Frame::Bulk(b"x".to_vec()));
    assert_eq!(piped[24], Frame::Bulk(b"1".to_vec()));
    assert_eq!(piped[25], Frame::Bulk(b"8".to_vec()));
}

#[test]
fn request_split_across_many_writes_is_reassembled() {
    let s = server();
    let mut r = s.raw();
    let req =
        b"*3\r\n$3\r\nSET\r\n$7\r\nproto:s\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$7\r\nproto:s\r\n";
    for b in req.iter() {
        r.send(&[*b]);
    }
    r.roundtrip(b"", b"+OK\r\n$5\r\nhello\r\n");
    // A trailing partial command does not hold back the complete one.
    r.roundtrip(b"*1\r\n$4\r\nPING\r\n$", b"+PONG\r\n");
}

#[test]
fn invalid_multibulk_length_closes_the_connection() {
    let s = server();
    for req in [
        &b"*a\r\n"[..],
        b"*3000000000\r\n",
        b"*1\n$4\r\nPING\r\n",
        b"*+1\r\n",
    ] {
        let mut r = s.raw();
        assert_reply_then_closed(
            &mut r,
            req,
            b"-ERR Protocol error: invalid multibulk length\r\n",
        );
    }
}

#[test]
fn invalid_bulk_length_closes_the_connection() {
    let s = server();
    for req in [
        &b"*1\r\n$a\r\n"[..],
        b"*1\r\n$-1\r\n",
        b"*1\r\n$ 4\r\nPING\r\n",
        b"*1\r\n$4 \r\nPING\r\n",
        b"*1\r\n$04\r\nPING\r\n",
    ] {
        let mut r = s.raw();
        assert_reply_then_closed(&mut r, req, b"-ERR Protocol error: invalid bulk length\r\n");
    }
}

#[test]
fn expected_dollar_closes_the_connection() {
    let s = server();
    let mut r = s.raw();
    assert_reply_then_closed(
        &mut r,
        b"*1\r\nx\r\n",
        b"-ERR Protocol error: expected '$', got 'x'\r\n",
    );
}

#[test]
fn replies_before_a_protocol_error_are_still_sent() {
    let s = server();
    let mut r = s.raw();
    assert_reply_then_closed(
        &mut r,
        b"PING\r\n*1\r\n$4\r\nPING\r\n*x\r\nPING\r\n",
        b"+PONG\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
    );
}

#[test]
fn unbalanced_quotes_close_the_connection() {
    let s = server();
    for req in [&b"SET \"a b\r\n"[..], b"ECHO \"a\"b\r\n", b"ECHO 'a'b\r\n"] {
        let mut r = s.raw();
        assert_reply_then_closed(
            &mut r,
            req,
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        );
    }
}

#[test]
fn oversized_headers_and_inline_requests_close_the_connection() {
    let s = server();
    let cases: [(Vec<u8>, &[u8]); 3] = [
        (
            vec![b'x'; 70_000],
            b"-ERR Protocol error: too big inline request\r\n",
        ),
        (
            [&b"*"[..], &[b'1'; 70_000]].concat(),
            b"-ERR Protocol error: too big mbulk count string\r\n",
        ),
        (
            [&b"*1\r\n$"[..], &[b'1'; 70_000]].concat(),
            b"-ERR Protocol error: too big bulk count string\r\n",
        ),
    ];
    for (req, expected) in cases {
        let mut r = s.raw();
        assert_reply_then_closed(&mut r, &req, expected);
    }
}

#[test]
fn bulk_longer_than_proto_max_bulk_len_is_refused() {
    let s = start(&["--proto-max-bulk-len", "1mb"]);
    let mut r = s.raw();
    // Exactly the limit is fine.
    let value = vec![b'v'; 1024 * 1024];
    let mut req = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$1048576\r\n".to_vec();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    r.roundtrip(&req, b"+OK\r\n");
    r.roundtrip(b"STRLEN big\r\n", b":1048576\r\n");
    // One byte more is a protocol error, before any of the body is read.
    assert_reply_then_closed(
        &mut r,
        b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$1048577\r\n",
        b"-ERR Protocol error: invalid bulk length\r\n",
    );
    // Commands that would build a longer string refuse with Redis's error.
    let mut r = s.raw();
    r.roundtrip(
        b"APPEND big x\r\n",
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    );
    r.roundtrip(
        b"SETRANGE big 1048576 x\r\n",
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    );
}

/// Later Redis releases (7.2.8+, 7.4.3+) limit what an unauthenticated
/// client may send; ferrokv does too, 7.0.15 does not.
#[test]
fn unauthenticated_clients_may_only_send_small_requests() {
    if against_redis() {
        return;
    }
    let s = start(&["--requirepass", "pw"]);
    let mut r = s.raw();
    assert_reply_then_closed(
        &mut r,
        b"*11\r\n",
        b"-ERR Protocol error: unauthenticated multibulk length\r\n",
    );
    let mut r = s.raw();
    assert_reply_then_closed(
        &mut r,
        b"*2\r\n$4\r\nECHO\r\n$16385\r\n",
        b"-ERR Protocol error: unauthenticated bulk length\r\n",
    );
    // After AUTH the same request is fine.
    let mut r = s.raw();
    r.roundtrip(b"AUTH pw\r\n", b"+OK\r\n");
    let mut req = b"*2\r\n$4\r\nECHO\r\n$16385\r\n".to_vec();
    req.extend_from_slice(&[b'e'; 16385]);
    req.extend_from_slice(b"\r\n");
    r.send(&req);
    assert_eq!(r.recv_exact(8 + 16385 + 2)[..9], b"$16385\r\ne"[..]);
}

#[test]
fn unknown_command_error_quotes_name_and_first_args() {
    let s = server();
    let mut r = s.raw();
    r.roundtrip(
        b"*3\r\n$3\r\nfoo\r\n$1\r\na\r\n$1\r\nb\r\n",
        b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n",
    );
    r.roundtrip(
        b"FOO\r\n",
        b"-ERR unknown command 'FOO', with args beginning with: \r\n",
    );
    // The connection stays usable.
    r.roundtrip(b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn wrong_arity_error_names_the_command_in_lower_case() {
    let s = server();
    let mut r = s.raw();
    r.roundtrip(
        b"GET\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    r.roundtrip(
        b"get a b\r\n",
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    r.roundtrip(
        b"PING a b\r\n",
        b"-ERR wrong number of arguments for 'ping' command\r\n",
    );
    r.roundtrip(
        b"CONFIG GET\r\n",
        b"-ERR wrong number of arguments for 'config|get' command\r\n",
    );
    r.roundtrip(
        b"CLIENT FOO\r\n",
        b"-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n",
    );
    r.roundtrip(
        b"CLIENT\r\n",
        b"-ERR wrong number of arguments for 'client' command\r\n",
    );
}

/// The HELLO reply without its `id` value, which differs per connection.
fn hello_without_id(proto: u8) -> (Vec<u8>, Vec<u8>) {
    let head = format!(
        "{}\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:{proto}\r\n$2\r\nid\r\n",
        if proto == 3 { "%7" } else { "*14" }
    );
    let tail =
        b"$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";
    (head.into_bytes(), tail.to_vec())
}

fn assert_hello(r: &mut Raw, req: &[u8], proto: u8) {
    r.send(req);
    let (head, tail) = hello_without_id(proto);
    let got = r.recv_exact(head.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&head)
    );
    let id_line = read_line(r);
    assert!(id_line.starts_with(b":"), "{id_line:?}");
    let got = r.recv_exact(tail.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&tail)
    );
}

fn read_line(r: &mut Raw) -> Vec<u8> {
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        line.extend(r.recv_exact(1));
    }
    line
}

#[test]
fn hello_3_replies_with_a_map_and_switches_to_resp3() {
    let s = server();
    let mut r = s.raw();
    assert_hello(&mut r, b"HELLO 3\r\n", 3);
    r.roundtrip(b"GET proto:nokey\r\n", b"_\r\n");
    r.roundtrip(b"MGET proto:nokey\r\n", b"*1\r\n_\r\n");
    r.roundtrip(
        b"CONFIG GET maxclients\r\n",
        b"%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n",
    );
    r.roundtrip(b"CLIENT GETNAME\r\n", b"_\r\n");
    r.roundtrip(b"OBJECT ENCODING proto:nokey\r\n", b"_\r\n");
    // HELLO with no version keeps the protocol; HELLO 2 goes back.
    assert_hello(&mut r, b"HELLO\r\n", 3);
    assert_hello(&mut r, b"HELLO 2\r\n", 2);
    r.roundtrip(b"GET proto:nokey\r\n", b"$-1\r\n");
    r.roundtrip(
        b"CONFIG GET maxclients\r\n",
        b"*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n",
    );
}

#[test]
fn hello_rejects_bad_versions_and_options() {
    let s = server();
    let mut r = s.raw();
    r.roundtrip(b"HELLO 4\r\n", b"-NOPROTO unsupported protocol version\r\n");
    r.roundtrip(b"HELLO 1\r\n", b"-NOPROTO unsupported protocol version\r\n");
    r.roundtrip(
        b"HELLO x\r\n",
        b"-ERR Protocol version is not an integer or out of range\r\n",
    );
    r.roundtrip(
        b"HELLO 3 foo\r\n",
        b"-ERR Syntax error in HELLO option 'foo'\r\n",
    );
    r.roundtrip(
        b"HELLO 3 SETNAME \"a b\"\r\n",
        b"-ERR Client names cannot contain spaces, newlines or special characters.\r\n",
    );
    // A failed HELLO leaves the connection in RESP2.
    r.roundtrip(b"GET proto:nokey\r\n", b"$-1\r\n");
    assert_hello(&mut r, b"HELLO 3 SETNAME proto-conn\r\n", 3);
    r.roundtrip(b"CLIENT GETNAME\r\n", b"$10\r\nproto-conn\r\n");
}

#[test]
fn resp3_types_from_debug_protocol() {
    let s = server();
    let mut r = s.raw();
    assert_hello(&mut r, b"HELLO 3\r\n", 3);
    for (t, expected) in [
        ("string", &b"$11\r\nHello World\r\n"[..]),
        ("integer", b":12345\r\n"),
        ("double", b",3.141\r\n"),
        ("bignum", b"(1234567999999999999999999999999999999\r\n"),
        ("null", b"_\r\n"),
        ("true", b"#t\r\n"),
        ("false", b"#f\r\n"),
        ("array", b"*3\r\n:0\r\n:1\r\n:2\r\n"),
        ("set", b"~3\r\n:0\r\n:1\r\n:2\r\n"),
        ("map", b"%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"),
        ("verbatim", b"=29\r\ntxt:This is a verbatim\nstring\r\n"),
        (
            "push",
            b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n$40\r\nSome real reply following the push reply\r\n",
        ),
        (
            "attrib",
            b"|1\r\n$14\r\nkey-popularity\r\n*2\r\n$7\r\nkey:123\r\n:90\r\n$39\r\nSome real reply following the attribute\r\n",
        ),
    ] {
        r.roundtrip(format!("DEBUG PROTOCOL {t}\r\n").as_bytes(), expected);
    }
    r.roundtrip(
        b"DEBUG PROTOCOL foo\r\n",
        b"-ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false\r\n",
    );
}

#[test]
fn resp2_shapes_of_resp3_types() {
    let s = server();
    let mut r = s.raw();
    for (t, expected) in [
        ("double", &b"$5\r\n3.141\r\n"[..]),
        (
            "bignum",
            b"$37\r\n1234567999999999999999999999999999999\r\n",
        ),
        ("null", b"$-1\r\n"),
        ("true", b":1\r\n"),
        ("false", b":0\r\n"),
        ("set", b"*3\r\n:0\r\n:1\r\n:2\r\n"),
        ("map", b"*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n"),
        ("verbatim", b"$25\r\nThis is a verbatim\nstring\r\n"),
        ("push", b"-ERR RESP2 is not supported by this command\r\n"),
        (
            "attrib",
            b"$39\r\nSome real reply following the attribute\r\n",
        ),
    ] {
        r.roundtrip(format!("DEBUG PROTOCOL {t}\r\n").as_bytes(), expected);
    }
}

#[test]
fn info_and_client_list_are_verbatim_strings_in_resp3() {
    let s = server();
    let mut r = s.raw();
    assert_hello(&mut r, b"HELLO 3\r\n", 3);
    for cmd in [
        &["INFO", "server"][..],
        &["CLIENT", "LIST"],
        &["CLIENT", "INFO"],
    ] {
        match r.cmd(cmd) {
            ferrokv_resp::Frame::Verbatim(fmt, text) => {
                assert_eq!(&fmt, b"txt", "{cmd:?}");
                assert!(!text.is_empty());
            }
            other => panic!("{cmd:?}: expected a verbatim string, got {other:?}"),
        }
    }
    // In RESP2 they are plain bulk strings.
    let mut r = s.raw();
    assert!(matches!(
        r.cmd(&["CLIENT", "INFO"]),
        ferrokv_resp::Frame::Bulk(_)
    ));
    match r.cmd(&["INFO", "server"]) {
        ferrokv_resp::Frame::Bulk(text) => {
            assert!(text.starts_with(b"# Server\r\nredis_version:7.0.15\r\n"))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn quit_replies_ok_and_closes() {
    let s = server();
    let mut r = s.raw();
    assert_reply_then_closed(&mut r, b"QUIT\r\nPING\r\n", b"+OK\r\n");
}

/// Sends `req`, ends the connection's input (a half-close: `shutdown`
/// of the write side, as `nc -N` and many scripts do) and reads to the
/// end: the server answers what came before the end, then closes, as
/// Redis does. Readiness is edge-triggered in ferrokv, and the end often
/// arrives with the last request: it must not wait for another event.
fn half_close(port: u16, req: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    s.write_all(req).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the server closes the connection after the end of its input");
    got
}

#[test]
fn the_end_of_a_clients_input_closes_it_after_its_replies() {
    let srv = server();
    assert_eq!(half_close(srv.port, b"PING\r\n"), b"+PONG\r\n");
    assert_eq!(
        half_close(
            srv.port,
            b"*3\r\n$3\r\nSET\r\n$7\r\nhalf:k1\r\n$1\r\nv\r\nGET half:k1\r\n"
        ),
        b"+OK\r\n$1\r\nv\r\n"
    );
    // A pipeline larger than one read: every reply, then the close.
    let mut req = Vec::new();
    for i in 0..20_000 {
        req.extend_from_slice(format!("INCR half:n{}\r\n", i % 7).as_bytes());
    }
    let got = half_close(srv.port, &req);
    assert_eq!(got.iter().filter(|&&b| b == b'\n').count(), 20_000);
    assert!(got.ends_with(b":2858\r\n"), "{:?}", &got[got.len() - 20..]);
    // A blocked client that ends its input is closed and unblocked.
    assert_eq!(half_close(srv.port, b"BLPOP half:none 0\r\n"), b"");
    common::wait_blocked(&srv, 0);
}
