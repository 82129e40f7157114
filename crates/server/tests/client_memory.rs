//! Guards the bounds on what one client's replies may cost the server:
//! `client-reply-backpressure` (a pipeline whose replies are not read
//! pauses instead of growing without end, and loses nothing), the reply
//! cap checked while one command writes (`EXEC` or `MGET` amplification),
//! and `maxmemory-clients` (Redis 7.0's client eviction, `CLIENT NO-EVICT`).
//! See docs/hostile-input.md.
mod common;
use common::{wait_for, Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::io::Write;
use std::time::Duration;

const MIB: usize = 1 << 20;

fn set_big(s: &ServerProcess, key: &str, len: usize) {
    let mut r = s.raw();
    let v = vec![b'x'; len];
    assert_eq!(
        r.cmd(&[b"SET".as_slice(), key.as_bytes(), &v]),
        Frame::Simple(b"OK".to_vec())
    );
}

fn info_u64(s: &ServerProcess, section: &str, field: &str) -> u64 {
    s.info_field(section, field)
        .unwrap_or_else(|| panic!("INFO {section} has {field}"))
        .parse()
        .unwrap()
}

/// Sends `n` pipelined `GET key` without reading anything.
fn pipeline_gets(r: &mut Raw, key: &str, n: usize) {
    let one = Frame::command(&["GET", key]);
    let mut all = Vec::with_capacity(one.len() * n);
    for _ in 0..n {
        all.extend_from_slice(&one);
    }
    r.s.write_all(&all).unwrap();
}

#[test]
fn a_pipeline_that_is_not_read_pauses_and_then_gets_every_reply() {
    let s = ServerProcess::ferrokv(&[]);
    set_big(&s, "big", MIB);
    let mut attacker = s.raw();
    // 300 replies of 1 MiB: far past the 8 MiB threshold.
    pipeline_gets(&mut attacker, "big", 300);
    wait_for("the client to be paused on its replies", 10, || {
        (info_u64(&s, "clients", "output_paused_clients") == 1).then_some(())
    });
    // While it is paused, its replies stay near the threshold.
    std::thread::sleep(Duration::from_millis(300));
    let mut victim = s.raw();
    assert_eq!(victim.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    let mem = info_u64(&s, "memory", "mem_clients_normal") as usize;
    assert!(
        mem < 32 * MIB,
        "a paused client holds {mem} bytes of buffers"
    );
    // Then it reads: every reply arrives, whole and in order.
    attacker
        .s
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let replies = attacker.read_frames(300);
    assert!(replies
        .iter()
        .all(|f| f.as_bytes().map(<[u8]>::len) == Some(MIB)));
    assert_eq!(info_u64(&s, "clients", "output_paused_clients"), 0);
    assert!(info_u64(&s, "stats", "client_output_pauses") >= 1);
}

#[test]
fn one_command_whose_reply_passes_maxmemory_clients_closes_its_client_and_keeps_its_writes() {
    let s = ServerProcess::ferrokv(&["--maxmemory-clients", "16mb"]);
    set_big(&s, "big", MIB);
    let mut attacker = s.raw();
    let mut req = Frame::command(&["MULTI"]);
    for _ in 0..100 {
        req.extend_from_slice(&Frame::command(&["GET", "big"]));
    }
    req.extend_from_slice(&Frame::command(&["INCR", "counter"]));
    req.extend_from_slice(&Frame::command(&["EXEC"]));
    attacker.s.write_all(&req).unwrap();
    // The EXEC ran to its end (its INCR applied) and its client was closed
    // rather than given a 100 MiB reply.
    let mut r = s.raw();
    wait_for("EXEC to run", 10, || {
        (r.cmd(&["GET", "counter"]) == Frame::Bulk(b"1".to_vec())).then_some(())
    });
    attacker
        .s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let got = attacker.read_to_close();
    assert!(got.len() < 100 * MIB);
    assert!(info_u64(&s, "stats", "client_output_buffer_limit_disconnections") >= 1);
    assert!((info_u64(&s, "memory", "used_memory") as usize) < 64 * MIB);
}

#[test]
fn mget_amplification_is_cut_by_the_hard_output_limit() {
    // Redis closes a client whose reply passes its hard limit; ferrokv
    // checks it while the one command writes.
    let s = ServerProcess::ferrokv(&["--client-output-buffer-limit", "normal 8mb 0 0"]);
    set_big(&s, "big", MIB);
    let mut attacker = s.raw();
    let mut args = vec!["MGET"];
    args.extend(std::iter::repeat_n("big", 200));
    attacker.send(&Frame::command(&args));
    attacker
        .s
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let got = attacker.read_to_close();
    assert!(got.len() <= 8 * MIB, "got {} bytes", got.len());
    let mut victim = s.raw();
    assert_eq!(victim.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
    // A legitimate large reply under the limit is whole.
    let mut ok = s.raw();
    let f = ok.cmd(&["MGET", "big", "big", "big"]);
    let Frame::Array(items) = f else {
        panic!("MGET is an array")
    };
    assert_eq!(items.len(), 3);
}

#[test]
fn maxmemory_clients_evicts_the_largest_client_and_spares_no_evict() {
    let s = ServerProcess::ferrokv(&["--maxmemory-clients", "24mb"]);
    set_big(&s, "big", MIB);
    // The exempt client grows first and largest.
    let mut exempt = s.raw();
    assert_eq!(
        exempt.cmd(&["CLIENT", "NO-EVICT", "on"]),
        Frame::Simple(b"OK".to_vec())
    );
    assert_eq!(
        exempt.cmd(&["CLIENT", "SETNAME", "exempt"]),
        Frame::Simple(b"OK".to_vec())
    );
    pipeline_gets(&mut exempt, "big", 40);
    let mut hogs: Vec<Raw> = (0..3).map(|_| s.raw()).collect();
    for h in &mut hogs {
        pipeline_gets(h, "big", 40);
    }
    wait_for("client eviction", 10, || {
        (info_u64(&s, "stats", "evicted_clients") >= 1).then_some(())
    });
    let mut r = s.raw();
    let list = r.cmd(&["CLIENT", "LIST"]);
    let list = String::from_utf8_lossy(list.as_bytes().unwrap()).into_owned();
    assert!(list.contains("name=exempt"), "{list}");
    assert_eq!(r.cmd(&["PING"]), Frame::Simple(b"PONG".to_vec()));
}

/// The fields of `CLIENT LIST`/`CLIENT INFO` line `line`, by name.
fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {name}= in {line}"))
}

/// `CLIENT LIST`'s output fields as Redis reports them: `obl`/`oll`/`omem`
/// are 0 for a client with nothing pending (the fixed reply buffer every
/// client has is not output memory), and `oll`/`omem` count the reply
/// waiting past that buffer while a client does not read. Runs against
/// redis-server too (`FERROKV_TESTS_TARGET=redis`).
#[test]
fn client_list_reports_pending_output_as_redis_does() {
    let s = common::reply::own_server(&[]);
    let mut c = s.raw();
    let Frame::Bulk(info) = c.cmd(&["CLIENT", "INFO"]) else {
        panic!("CLIENT INFO is a bulk string")
    };
    let info = String::from_utf8(info).unwrap();
    for f in ["obl", "oll", "omem"] {
        assert_eq!(field(&info, f), "0", "{info}");
    }
    set_big(&s, "big", 32 * MIB);
    let mut slow = s.raw();
    let Frame::Integer(id) = slow.cmd(&["CLIENT", "ID"]) else {
        panic!("CLIENT ID is an integer")
    };
    // 32 MiB more than the loopback socket's buffers take: most of the
    // reply waits in the server while `slow` reads nothing.
    slow.send(&Frame::command(&["GET", "big"]));
    let line = wait_for("the unread reply to wait in the server", 30, || {
        let Frame::Bulk(l) = c.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]) else {
            panic!("CLIENT LIST is a bulk string")
        };
        let l = String::from_utf8(l).unwrap();
        (field(&l, "omem").parse::<u64>().unwrap() > MIB as u64).then_some(l)
    });
    assert!(field(&line, "oll").parse::<u64>().unwrap() > 0, "{line}");
    match slow.read_frame() {
        Frame::Bulk(v) => assert_eq!(v.len(), 32 * MIB),
        other => panic!("GET big: {other:?}"),
    }
    // All of it read: nothing is pending any more.
    let line = wait_for("the reply to be written out", 30, || {
        let Frame::Bulk(l) = c.cmd(&["CLIENT", "LIST", "ID", &id.to_string()]) else {
            panic!("CLIENT LIST is a bulk string")
        };
        let l = String::from_utf8(l).unwrap();
        (field(&l, "omem") == "0").then_some(l)
    });
    assert_eq!(field(&line, "oll"), "0", "{line}");
}
