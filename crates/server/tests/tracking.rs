//! Guards client-side caching (`CLIENT TRACKING`) as Redis 7.0 does it:
//! which reads remember keys and which changes invalidate them, the RESP3
//! `invalidate` pushes and the `__redis__:invalidate` messages of a RESP2
//! redirect, BCAST prefixes, OPTIN/OPTOUT with CLIENT CACHING, NOLOOP, a
//! redirect target that goes away, FLUSHALL, expiry, MULTI/EXEC, the
//! `tracking-table-max-keys` bound, CLIENT TRACKINGINFO / GETREDIR / LIST
//! and the INFO fields — every reply exact, and the same against the real
//! redis-server with `FERROKV_TESTS_TARGET=redis`; plus redis-py's own
//! client-side cache over ferrokv.
mod common;
#[allow(unused_imports)]
use common::reply::*;

use common::{wait_for, ServerProcess};
use ferrokv_resp::Frame;
use std::process::Command;

/// A connection that keeps what it read past a frame, so a reply and the
/// pushes after it in one segment are all seen, in order.
struct Conn {
    raw: common::Raw,
    buf: Vec<u8>,
    id: i64,
}

impl Conn {
    fn new(s: &ServerProcess) -> Conn {
        let mut c = Conn {
            raw: s.raw(),
            buf: Vec::new(),
            id: 0,
        };
        c.id = match c.cmd(&["CLIENT", "ID"]) {
            Frame::Integer(i) => i,
            f => panic!("CLIENT ID answered {f:?}"),
        };
        c
    }

    /// A RESP3 connection.
    fn resp3(s: &ServerProcess) -> Conn {
        let mut c = Conn::new(s);
        assert!(matches!(c.cmd(&["HELLO", "3"]), Frame::Map(_)));
        c
    }

    fn send(&mut self, args: &[&str]) {
        self.raw.send(&Frame::command(args));
    }

    fn next(&mut self) -> Frame {
        use std::io::Read;
        let mut chunk = [0u8; 65536];
        loop {
            match Frame::decode(&self.buf) {
                Ok((f, n)) => {
                    self.buf.drain(..n);
                    return f;
                }
                Err(ferrokv_resp::frame::FrameError::Incomplete) => {}
                Err(e) => panic!("bad frame {e:?}"),
            }
            let n = self.raw.s.read(&mut chunk).unwrap();
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends a command and reads the next frame (its reply, unless a push
    /// came first).
    fn cmd(&mut self, args: &[&str]) -> Frame {
        self.send(args);
        self.next()
    }

    /// Nothing arrived before this point: a PING's reply comes next (any
    /// invalidation already sent would be ahead of it).
    fn nothing_pending(&mut self) {
        let pong = self.cmd(&["PING"]);
        assert!(
            pong == Frame::Simple(b"PONG".to_vec()) || pong == arr(vec![bulk("pong"), bulk("")]),
            "expected no message before PING's reply, got {pong:?}"
        );
    }
}

/// `>2 invalidate [keys]`.
fn invalidate(keys: &[&str]) -> Frame {
    Frame::Push(vec![bulk("invalidate"), bulks(keys)])
}

/// `>2 invalidate _` (FLUSHDB, FLUSHALL).
fn invalidate_all() -> Frame {
    Frame::Push(vec![bulk("invalidate"), Frame::Null])
}

fn info_num(s: &ServerProcess, section: &str, field: &str) -> i64 {
    s.info_field(section, field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .trim()
        .parse()
        .unwrap()
}

fn pong() -> Frame {
    Frame::Simple(b"PONG".to_vec())
}

#[test]
fn tracking_subcommand_errors_match_redis() {
    let s = own_server(&[]);
    let mut a = Conn::new(&s);
    let b = Conn::new(&s);
    let bid = b.id.to_string();
    let overlap_new = "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap.";
    let overlap_old = "ERR Prefix 'xa' overlaps with an existing prefix 'x'. Prefixes for a single client must not overlap.";
    let bcast_switch = "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.";
    let optin_switch = "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.";
    let caching_off = "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled";
    let no_client = "ERR The client ID you want redirect to does not exist";
    let cases: Vec<(Vec<&str>, Frame)> = vec![
        (
            vec!["CLIENT", "TRACKING"],
            err("ERR wrong number of arguments for 'client|tracking' command"),
        ),
        (vec!["CLIENT", "TRACKING", "foo"], err("ERR syntax error")),
        (vec!["CLIENT", "TRACKING", "on", "foo"], err("ERR syntax error")),
        (vec!["CLIENT", "TRACKING", "on", "redirect"], err("ERR syntax error")),
        (
            vec!["CLIENT", "TRACKING", "on", "redirect", "abc"],
            err("ERR value is not an integer or out of range"),
        ),
        (vec!["CLIENT", "TRACKING", "on", "redirect", "0"], err(no_client)),
        (vec!["CLIENT", "TRACKING", "on", "redirect", "-5"], err(no_client)),
        (vec!["CLIENT", "TRACKING", "maybe", "redirect", "99999"], err(no_client)),
        (
            vec!["CLIENT", "TRACKING", "on", "optin", "optout"],
            err("ERR You can't specify both OPTIN mode and OPTOUT mode"),
        ),
        (
            vec!["CLIENT", "TRACKING", "on", "bcast", "optin", "optout"],
            err("ERR OPTIN and OPTOUT are not compatible with BCAST"),
        ),
        (
            vec!["CLIENT", "TRACKING", "on", "prefix", "foo"],
            err("ERR PREFIX option requires BCAST mode to be enabled"),
        ),
        (vec!["CLIENT", "TRACKING", "on", "bcast", "prefix"], err("ERR syntax error")),
        (
            vec!["CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "ab"],
            err(overlap_new),
        ),
        (
            vec!["CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "b", "prefix", "a"],
            err("ERR Prefix 'a' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap."),
        ),
        (
            vec!["CLIENT", "TRACKING", "on", "redirect", &bid, "redirect", &bid],
            err("ERR A client can only redirect to a single other client"),
        ),
        (vec!["CLIENT", "TRACKING", "off", "prefix", "foo"], ok()),
        (vec!["CLIENT", "CACHING", "yes"], err(caching_off)),
        (vec!["CLIENT", "CACHING", "maybe"], err(caching_off)),
        (vec!["CLIENT", "GETREDIR"], int(-1)),
        (vec!["CLIENT", "TRACKING", "on", "optin"], ok()),
        (vec!["CLIENT", "GETREDIR"], int(0)),
        (
            vec!["CLIENT", "CACHING", "no"],
            err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."),
        ),
        (vec!["CLIENT", "CACHING", "maybe"], err("ERR syntax error")),
        (vec!["CLIENT", "TRACKING", "on", "optout"], err(optin_switch)),
        (vec!["CLIENT", "TRACKING", "on", "bcast"], err(bcast_switch)),
        (vec!["CLIENT", "TRACKING", "on", "optin", "optout"], err("ERR You can't specify both OPTIN mode and OPTOUT mode")),
        (vec!["CLIENT", "TRACKING", "off"], ok()),
        (vec!["CLIENT", "TRACKING", "on", "bcast", "prefix", "x", "redirect", &bid], ok()),
        (vec!["CLIENT", "GETREDIR"], int(b.id)),
        (vec!["CLIENT", "TRACKING", "on", "prefix", "x"], err("ERR PREFIX option requires BCAST mode to be enabled")),
        (vec!["CLIENT", "TRACKING", "on", "optin"], err(bcast_switch)),
        (vec!["CLIENT", "TRACKING", "on", "bcast", "prefix", "z", "prefix", "xa"], err(overlap_old)),
        (vec!["CLIENT", "TRACKING", "on", "bcast", "optout"], err("ERR OPTIN and OPTOUT are not compatible with BCAST")),
        (vec!["CLIENT", "TRACKING", "off"], ok()),
        (vec!["CLIENT", "GETREDIR"], int(-1)),
    ];
    for (args, expected) in cases {
        assert_eq!(a.cmd(&args), expected, "{args:?}");
    }
    a.nothing_pending();
}

#[test]
fn trackinginfo_getredir_and_client_list_show_the_mode() {
    let s = own_server(&[]);
    let mut a = Conn::new(&s);
    let b = Conn::new(&s);
    let info = |a: &mut Conn| a.cmd(&["CLIENT", "TRACKINGINFO"]);
    let expect = |flags: &[&str], redirect: i64, prefixes: &[&str]| {
        arr(vec![
            bulk("flags"),
            bulks(flags),
            bulk("redirect"),
            int(redirect),
            bulk("prefixes"),
            bulks(prefixes),
        ])
    };
    assert_eq!(info(&mut a), expect(&["off"], -1, &[]));
    let line = |a: &mut Conn| {
        let f = a.cmd(&["CLIENT", "INFO"]);
        String::from_utf8_lossy(f.as_bytes().unwrap()).into_owned()
    };
    assert!(line(&mut a).contains(" flags=N "), "{}", line(&mut a));
    assert!(line(&mut a).contains(" redir=-1 "));

    let bid = b.id.to_string();
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "redirect", &bid]), ok());
    assert_eq!(info(&mut a), expect(&["on"], b.id, &[]));
    let l = line(&mut a);
    assert!(l.contains(" flags=t "), "{l}");
    assert!(l.contains(&format!(" redir={} ", b.id)), "{l}");

    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(
        a.cmd(&["CLIENT", "TRACKING", "on", "bcast", "prefix", "y", "prefix", "x", "noloop"]),
        ok()
    );
    // Prefixes are added to, listed sorted.
    assert_eq!(
        a.cmd(&["CLIENT", "TRACKING", "on", "bcast", "prefix", "w"]),
        ok()
    );
    assert_eq!(info(&mut a), expect(&["on", "bcast"], 0, &["w", "x", "y"]));
    let l = line(&mut a);
    assert!(l.contains(" flags=tB "), "{l}");
    assert!(l.contains(" redir=0 "), "{l}");
    assert_eq!(info_num(&s, "stats", "tracking_total_prefixes"), 3);

    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(
        a.cmd(&["CLIENT", "TRACKING", "on", "optout", "noloop"]),
        ok()
    );
    assert_eq!(a.cmd(&["CLIENT", "CACHING", "no"]), ok());
    assert_eq!(
        info(&mut a),
        expect(&["on", "optout", "caching-no", "noloop"], 0, &[])
    );
    // Any command but a CLIENT one lets CACHING lapse; an unknown
    // subcommand of CLIENT does too (no command was found).
    assert!(matches!(a.cmd(&["CLIENT", "NOSUCH"]), Frame::Error(_)));
    assert_eq!(info(&mut a), expect(&["on", "optout", "noloop"], 0, &[]));

    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "optin"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "CACHING", "yes"]), ok());
    assert_eq!(
        info(&mut a),
        expect(&["on", "optin", "caching-yes"], 0, &[])
    );
    assert_eq!(a.cmd(&["PING"]), pong());
    assert_eq!(info(&mut a), expect(&["on", "optin"], 0, &[]));

    // RESET turns tracking off.
    assert_eq!(a.cmd(&["RESET"]), Frame::Simple(b"RESET".to_vec()));
    assert_eq!(info(&mut a), expect(&["off"], -1, &[]));
    assert_eq!(info_num(&s, "clients", "tracking_clients"), 0);
}

#[test]
fn default_mode_invalidates_what_the_client_read() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(w.cmd(&["MSET", "k1", "1", "k2", "2", "k3", "3"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(a.cmd(&["GET", "k1"]), bulk("1"));
    assert_eq!(
        a.cmd(&["MGET", "k2", "missing"]),
        arr(vec![bulk("2"), Frame::Null])
    );
    // A write command remembers nothing; k3 is not tracked.
    assert_eq!(a.cmd(&["APPEND", "k3", "x"]), int(2));
    assert_eq!(info_num(&s, "clients", "tracking_clients"), 1);
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 3);
    assert_eq!(info_num(&s, "stats", "tracking_total_items"), 3);

    assert_eq!(w.cmd(&["SET", "k1", "x"]), ok());
    assert_eq!(a.next(), invalidate(&["k1"]));
    // Forgotten once invalidated: a second write says nothing.
    assert_eq!(w.cmd(&["SET", "k1", "y"]), ok());
    assert_eq!(w.cmd(&["SET", "k3", "y"]), ok());
    a.nothing_pending();
    // DEL signals the keys it deleted only; a key missing stays tracked.
    assert_eq!(w.cmd(&["DEL", "missing", "k2"]), int(1));
    assert_eq!(a.next(), invalidate(&["k2"]));
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 1);
    // Keys are global: a write in another database invalidates too.
    assert_eq!(w.cmd(&["SELECT", "3"]), ok());
    assert_eq!(w.cmd(&["SET", "missing", "v"]), ok());
    assert_eq!(a.next(), invalidate(&["missing"]));
    // SWAPDB invalidates nothing.
    assert_eq!(a.cmd(&["GET", "k1"]), bulk("y"));
    assert_eq!(w.cmd(&["SWAPDB", "0", "3"]), ok());
    a.nothing_pending();
    assert_eq!(w.cmd(&["SWAPDB", "0", "3"]), ok());

    // The client's own write: the push follows its reply.
    a.send(&["SET", "k1", "z"]);
    assert_eq!(a.next(), ok());
    assert_eq!(a.next(), invalidate(&["k1"]));
    // ... and comes even with CLIENT REPLY OFF.
    assert_eq!(a.cmd(&["GET", "k1"]), bulk("z"));
    a.send(&["CLIENT", "REPLY", "OFF"]);
    a.send(&["SET", "k1", "q"]);
    assert_eq!(a.next(), invalidate(&["k1"]));
    assert_eq!(a.cmd(&["CLIENT", "REPLY", "ON"]), ok());

    // Other kinds of change: INCR, EXPIRE, RENAME (both keys), a list push.
    assert_eq!(
        a.cmd(&["MGET", "n", "k1", "l"]),
        arr(vec![Frame::Null, bulk("q"), Frame::Null])
    );
    assert_eq!(w.cmd(&["SELECT", "0"]), ok());
    assert_eq!(w.cmd(&["INCR", "n"]), int(1));
    assert_eq!(a.next(), invalidate(&["n"]));
    assert_eq!(w.cmd(&["RENAME", "k1", "l"]), ok());
    assert_eq!(a.next(), invalidate(&["k1"]));
    assert_eq!(a.next(), invalidate(&["l"]));
    a.nothing_pending();

    // Off: nothing more, and the state is gone.
    assert_eq!(a.cmd(&["GET", "n"]), bulk("1"));
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(w.cmd(&["INCR", "n"]), int(2));
    a.nothing_pending();
    assert_eq!(info_num(&s, "clients", "tracking_clients"), 0);
}

#[test]
fn a_resp2_client_without_redirect_gets_no_messages() {
    let s = own_server(&[]);
    let mut a = Conn::new(&s);
    let mut w = Conn::new(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(a.cmd(&["GET", "k"]), Frame::Null);
    assert_eq!(w.cmd(&["SET", "k", "v"]), ok());
    a.nothing_pending();
    // The key was still forgotten.
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 0);
}

#[test]
fn bcast_sends_the_keys_changed_under_each_prefix() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut all = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(
        a.cmd(&["CLIENT", "TRACKING", "on", "bcast", "prefix", "b:", "prefix", "a:"]),
        ok()
    );
    assert_eq!(all.cmd(&["CLIENT", "TRACKING", "on", "bcast"]), ok());
    assert_eq!(info_num(&s, "stats", "tracking_total_prefixes"), 3);
    // Nothing needs reading first; one message per prefix, keys sorted.
    assert_eq!(w.cmd(&["MSET", "a:2", "1", "a:1", "1", "c:1", "1"]), ok());
    assert_eq!(a.next(), invalidate(&["a:1", "a:2"]));
    a.nothing_pending();
    assert_eq!(all.next(), invalidate(&["a:1", "a:2", "c:1"]));
    all.nothing_pending();
    assert_eq!(w.cmd(&["SET", "b:x", "1"]), ok());
    assert_eq!(a.next(), invalidate(&["b:x"]));
    assert_eq!(all.next(), invalidate(&["b:x"]));
    // Reads add nothing to the table in BCAST mode.
    assert_eq!(a.cmd(&["GET", "a:1"]), bulk("1"));
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 0);
    // The client's own writes too (without NOLOOP).
    a.send(&["SET", "a:1", "2"]);
    assert_eq!(a.next(), ok());
    assert_eq!(a.next(), invalidate(&["a:1"]));
    assert_eq!(all.next(), invalidate(&["a:1"]));
    // Off: its prefixes go.
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(info_num(&s, "stats", "tracking_total_prefixes"), 1);
    drop(all);
    wait_for("the BCAST client's prefix to go", 10, || {
        (info_num(&s, "stats", "tracking_total_prefixes") == 0).then_some(())
    });
    assert_eq!(info_num(&s, "clients", "tracking_clients"), 0);
}

#[test]
fn noloop_skips_the_clients_own_writes() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut b = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "noloop"]), ok());
    assert_eq!(a.cmd(&["GET", "k"]), Frame::Null);
    assert_eq!(a.cmd(&["SET", "k", "1"]), ok());
    a.nothing_pending();
    // Its own write removed the entry: nobody else's write says anything.
    assert_eq!(w.cmd(&["SET", "k", "2"]), ok());
    a.nothing_pending();
    assert_eq!(a.cmd(&["GET", "k"]), bulk("2"));
    assert_eq!(w.cmd(&["SET", "k", "3"]), ok());
    assert_eq!(a.next(), invalidate(&["k"]));
    // FLUSHALL tells a NOLOOP client anyway.
    assert_eq!(a.cmd(&["FLUSHALL"]), ok());
    assert_eq!(a.next(), invalidate_all());

    // BCAST with NOLOOP: only the keys others changed.
    assert_eq!(
        b.cmd(&["CLIENT", "TRACKING", "on", "bcast", "noloop"]),
        ok()
    );
    assert_eq!(b.cmd(&["SET", "mine", "1"]), ok());
    b.nothing_pending();
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(
        b.cmd(&["SET", "mine", "2"]),
        Frame::Simple(b"QUEUED".to_vec())
    );
    assert_eq!(b.cmd(&["EXEC"]), arr(vec![ok()]));
    b.nothing_pending();
    assert_eq!(w.cmd(&["SET", "theirs", "1"]), ok());
    assert_eq!(b.next(), invalidate(&["theirs"]));
}

#[test]
fn optin_and_optout_follow_client_caching_for_the_next_command() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "optin"]), ok());
    assert_eq!(a.cmd(&["GET", "k1"]), Frame::Null);
    assert_eq!(a.cmd(&["CLIENT", "CACHING", "yes"]), ok());
    assert_eq!(a.cmd(&["GET", "k2"]), Frame::Null);
    assert_eq!(a.cmd(&["GET", "k3"]), Frame::Null);
    // CACHING then another command: it applied to that one only.
    assert_eq!(a.cmd(&["CLIENT", "CACHING", "yes"]), ok());
    assert_eq!(a.cmd(&["PING"]), pong());
    assert_eq!(a.cmd(&["GET", "k4"]), Frame::Null);
    // Inside MULTI it covers the whole transaction.
    assert_eq!(a.cmd(&["CLIENT", "CACHING", "yes"]), ok());
    assert_eq!(a.cmd(&["MULTI"]), ok());
    assert_eq!(a.cmd(&["GET", "k5"]), Frame::Simple(b"QUEUED".to_vec()));
    assert_eq!(a.cmd(&["GET", "k6"]), Frame::Simple(b"QUEUED".to_vec()));
    assert_eq!(a.cmd(&["EXEC"]), arr(vec![Frame::Null, Frame::Null]));
    assert_eq!(a.cmd(&["GET", "k7"]), Frame::Null);
    assert_eq!(
        w.cmd(&[
            "MSET", "k1", "1", "k2", "1", "k3", "1", "k4", "1", "k5", "1", "k6", "1", "k7", "1"
        ]),
        ok()
    );
    assert_eq!(a.next(), invalidate(&["k2"]));
    assert_eq!(a.next(), invalidate(&["k5"]));
    assert_eq!(a.next(), invalidate(&["k6"]));
    a.nothing_pending();

    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "optout"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "CACHING", "no"]), ok());
    assert_eq!(a.cmd(&["GET", "k1"]), bulk("1"));
    assert_eq!(a.cmd(&["GET", "k2"]), bulk("1"));
    assert_eq!(w.cmd(&["DEL", "k1", "k2"]), int(2));
    assert_eq!(a.next(), invalidate(&["k2"]));
    a.nothing_pending();
}

#[test]
fn redirect_to_a_resp2_subscriber_uses_the_invalidate_channel() {
    let s = own_server(&[]);
    let mut sub = Conn::new(&s);
    let mut a = Conn::new(&s);
    let mut w = Conn::new(&s);
    assert_eq!(
        sub.cmd(&["SUBSCRIBE", "__redis__:invalidate"]),
        arr(vec![
            bulk("subscribe"),
            bulk("__redis__:invalidate"),
            int(1)
        ])
    );
    let sid = sub.id.to_string();
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "redirect", &sid]), ok());
    assert_eq!(a.cmd(&["GET", "k"]), Frame::Null);
    assert_eq!(w.cmd(&["SET", "k", "1"]), ok());
    let message =
        |payload: Frame| arr(vec![bulk("message"), bulk("__redis__:invalidate"), payload]);
    assert_eq!(sub.next(), message(bulks(&["k"])));
    a.nothing_pending();
    // The tracking client's own write goes to the target too.
    assert_eq!(a.cmd(&["GET", "k"]), bulk("1"));
    assert_eq!(a.cmd(&["DEL", "k"]), int(1));
    assert_eq!(sub.next(), message(bulks(&["k"])));
    // A flush: the payload is the tracking client's (RESP2) null.
    assert_eq!(w.cmd(&["FLUSHDB"]), ok());
    assert_eq!(sub.next(), message(Frame::Null));
    sub.nothing_pending();
    // The target is not subscribed to anything: nothing can reach it.
    let mut plain = Conn::new(&s);
    let pid = plain.id.to_string();
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "redirect", &pid]), ok());
    assert_eq!(a.cmd(&["GET", "k"]), Frame::Null);
    assert_eq!(w.cmd(&["SET", "k", "2"]), ok());
    plain.nothing_pending();
    a.nothing_pending();
}

#[test]
fn redirect_to_a_resp3_client_pushes_there() {
    let s = own_server(&[]);
    let mut target = Conn::resp3(&s);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    let tid = target.id.to_string();
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on", "redirect", &tid]), ok());
    assert_eq!(a.cmd(&["GET", "k"]), Frame::Null);
    assert_eq!(w.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(target.next(), invalidate(&["k"]));
    a.nothing_pending();
    assert_eq!(w.cmd(&["FLUSHALL"]), ok());
    assert_eq!(target.next(), invalidate_all());
    a.nothing_pending();
}

#[test]
fn a_redirect_target_that_went_away_breaks_the_redirect() {
    let s = own_server(&[]);
    let target = Conn::new(&s);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    let tid = target.id;
    assert_eq!(
        a.cmd(&["CLIENT", "TRACKING", "on", "redirect", &tid.to_string()]),
        ok()
    );
    assert_eq!(a.cmd(&["GET", "k"]), Frame::Null);
    drop(target);
    wait_for("the redirect target to close", 10, || {
        let list = w.cmd(&["CLIENT", "LIST"]);
        let text = String::from_utf8_lossy(list.as_bytes().unwrap()).into_owned();
        (!text.contains(&format!("id={tid} "))).then_some(())
    });
    // Found broken when a message is due, not before.
    assert_eq!(a.cmd(&["CLIENT", "GETREDIR"]), int(tid));
    assert_eq!(w.cmd(&["SET", "k", "1"]), ok());
    assert_eq!(
        a.next(),
        Frame::Push(vec![bulk("tracking-redir-broken"), int(tid)])
    );
    let info = a.cmd(&["CLIENT", "TRACKINGINFO"]);
    assert_eq!(
        info,
        Frame::Map(vec![
            (
                bulk("flags"),
                Frame::Set(vec![bulk("on"), bulk("broken_redirect")])
            ),
            (bulk("redirect"), int(tid)),
            (bulk("prefixes"), Frame::Array(vec![])),
        ])
    );
    let line = a.cmd(&["CLIENT", "INFO"]);
    let line = String::from_utf8_lossy(line.as_bytes().unwrap()).into_owned();
    assert!(line.contains(" flags=tR "), "{line}");
    // A RESP2 tracking client is told nothing, but the flag is set.
    let target = Conn::new(&s);
    let mut b = Conn::new(&s);
    let tid = target.id;
    assert_eq!(
        b.cmd(&["CLIENT", "TRACKING", "on", "redirect", &tid.to_string()]),
        ok()
    );
    assert_eq!(b.cmd(&["GET", "k2"]), Frame::Null);
    drop(target);
    wait_for("the second target to close", 10, || {
        let list = w.cmd(&["CLIENT", "LIST"]);
        let text = String::from_utf8_lossy(list.as_bytes().unwrap()).into_owned();
        (!text.contains(&format!("id={tid} "))).then_some(())
    });
    assert_eq!(w.cmd(&["SET", "k2", "1"]), ok());
    b.nothing_pending();
    let line = b.cmd(&["CLIENT", "INFO"]);
    let line = String::from_utf8_lossy(line.as_bytes().unwrap()).into_owned();
    assert!(line.contains(" flags=tR "), "{line}");
}

#[test]
fn flushdb_and_flushall_invalidate_everything_and_empty_the_table() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(
        a.cmd(&["MGET", "x", "y"]),
        arr(vec![Frame::Null, Frame::Null])
    );
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 2);
    // Even a flush of an empty database, and of another one.
    assert_eq!(w.cmd(&["SELECT", "5"]), ok());
    assert_eq!(w.cmd(&["FLUSHDB"]), ok());
    assert_eq!(a.next(), invalidate_all());
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 0);
    assert_eq!(info_num(&s, "stats", "tracking_total_items"), 0);
    assert_eq!(w.cmd(&["SET", "x", "1"]), ok());
    a.nothing_pending();
    // The client's own FLUSHALL: after its reply.
    a.send(&["FLUSHALL"]);
    assert_eq!(a.next(), ok());
    assert_eq!(a.next(), invalidate_all());
    a.nothing_pending();
}

#[test]
fn expired_keys_are_invalidated() {
    let s = own_server(&["--enable-debug-command", "yes"]);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(w.cmd(&["SET", "gone", "1", "PX", "100"]), ok());
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(a.cmd(&["GET", "gone"]), bulk("1"));
    // The active expiry cycle deletes it: a message with nobody's command.
    assert_eq!(a.next(), invalidate(&["gone"]));
    assert_eq!(a.cmd(&["EXISTS", "gone"]), int(0));

    // Found expired by another client's read: invalidated as well.
    assert_eq!(w.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]), ok());
    assert_eq!(w.cmd(&["SET", "lazy", "1", "PX", "50"]), ok());
    assert_eq!(a.cmd(&["GET", "lazy"]), bulk("1"));
    std::thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(w.cmd(&["GET", "lazy"]), Frame::Null);
    assert_eq!(a.next(), invalidate(&["lazy"]));
    assert_eq!(w.cmd(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]), ok());
}

#[test]
fn multi_exec_invalidations_follow_the_exec_reply() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut b = Conn::resp3(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(b.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(
        a.cmd(&["MGET", "k1", "k2"]),
        arr(vec![Frame::Null, Frame::Null])
    );
    assert_eq!(b.cmd(&["GET", "k1"]), Frame::Null);
    assert_eq!(a.cmd(&["MULTI"]), ok());
    let queued = Frame::Simple(b"QUEUED".to_vec());
    assert_eq!(a.cmd(&["SET", "k1", "1"]), queued);
    assert_eq!(a.cmd(&["SET", "k2", "2"]), queued);
    assert_eq!(a.cmd(&["GET", "k1"]), queued);
    a.send(&["EXEC"]);
    assert_eq!(a.next(), arr(vec![ok(), ok(), bulk("1")]));
    assert_eq!(a.next(), invalidate(&["k1"]));
    assert_eq!(a.next(), invalidate(&["k2"]));
    // The GET inside the transaction, after the SET, tracked k1 again.
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 1);
    a.nothing_pending();
    assert_eq!(b.next(), invalidate(&["k1"]));
    b.nothing_pending();
    // Tracking turned on inside the transaction covers what follows it.
    assert_eq!(b.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(b.cmd(&["CLIENT", "TRACKING", "on"]), queued);
    assert_eq!(b.cmd(&["GET", "m1"]), queued);
    assert_eq!(b.cmd(&["SET", "m1", "v"]), queued);
    assert_eq!(b.cmd(&["GET", "m2"]), queued);
    b.send(&["EXEC"]);
    assert_eq!(b.next(), arr(vec![ok(), Frame::Null, ok(), Frame::Null]));
    assert_eq!(b.next(), invalidate(&["m1"]));
    b.nothing_pending();
    assert_eq!(a.cmd(&["SET", "m2", "1"]), ok());
    assert_eq!(b.next(), invalidate(&["m2"]));
    assert_eq!(b.cmd(&["CLIENT", "TRACKING", "off"]), ok());
    assert_eq!(a.cmd(&["GET", "k1"]), bulk("1"));
    // Scripts' writes invalidate as well.
    assert_eq!(
        b.cmd(&["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "k1"]),
        ok()
    );
    assert_eq!(a.next(), invalidate(&["k1"]));
}

/// Keys evicted for `maxmemory` are invalidated like any deletion.
#[test]
fn keys_evicted_for_maxmemory_are_invalidated() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    let value = "x".repeat(4096);
    let keys: Vec<String> = (0..200).map(|i| format!("ev:{i}")).collect();
    for k in &keys {
        assert_eq!(w.cmd(&["SET", k, &value]), ok());
    }
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(|k| k.as_str()));
    assert!(matches!(a.cmd(&mget), Frame::Array(v) if v.len() == 200));
    assert_eq!(
        w.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]),
        ok()
    );
    let used = info_num(&s, "memory", "used_memory");
    let limit = (used - 200 * 1024).to_string();
    assert_eq!(w.cmd(&["CONFIG", "SET", "maxmemory", &limit]), ok());
    // Any command makes room first.
    assert!(matches!(
        w.cmd(&["GET", "ev:0"]),
        Frame::Null | Frame::Bulk(_)
    ));
    assert!(info_num(&s, "stats", "evicted_keys") > 0);
    assert_eq!(w.cmd(&["CONFIG", "SET", "maxmemory", "0"]), ok());
    a.send(&["PING"]);
    let mut invalidated = 0;
    loop {
        match a.next() {
            Frame::Push(v) => {
                assert_eq!(v[0], bulk("invalidate"), "{v:?}");
                match &v[1] {
                    Frame::Array(k) if k.len() == 1 => {
                        assert!(keys.iter().any(|n| k[0] == bulk(n)), "{k:?}");
                        invalidated += 1;
                    }
                    f => panic!("unexpected payload {f:?}"),
                }
            }
            f => {
                assert_eq!(f, pong());
                break;
            }
        }
    }
    // One message per evicted key: every key was tracked.
    assert_eq!(invalidated as i64, info_num(&s, "stats", "evicted_keys"));
}

/// Redis 7.0 remembers, for a read a script makes, the keys the script
/// command declared (the caller's), not the keys the script read; EVAL_RO,
/// itself read-only, remembers its declared keys.
#[test]
fn script_reads_remember_the_declared_keys() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(
        a.cmd(&["EVAL", "return redis.call('get', 'sk1')", "1", "sk2"]),
        Frame::Null
    );
    assert_eq!(
        a.cmd(&["EVAL_RO", "return redis.call('get', 'sk3')", "1", "sk4"]),
        Frame::Null
    );
    // A script that reads nothing remembers nothing.
    assert_eq!(a.cmd(&["EVAL", "return 1", "1", "sk5"]), int(1));
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 2);
    assert_eq!(
        w.cmd(&["MSET", "sk1", "1", "sk2", "1", "sk3", "1", "sk4", "1", "sk5", "1"]),
        ok()
    );
    assert_eq!(a.next(), invalidate(&["sk2"]));
    assert_eq!(a.next(), invalidate(&["sk4"]));
    a.nothing_pending();
}

/// A client woken from BLMOVE runs inside the writer's command: the keys
/// it moves are invalidated for the writer (after the writer's reply) and
/// for itself (after its own reply), as Redis does.
#[test]
fn a_blocked_client_served_by_a_write_invalidates_what_it_moved() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    let mut b = Conn::resp3(&s);
    let mut w = Conn::new(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(
        a.cmd(&["MGET", "src", "dst"]),
        arr(vec![Frame::Null, Frame::Null])
    );
    b.send(&["BLMOVE", "src", "dst", "LEFT", "LEFT", "0"]);
    wait_for("BLMOVE to block", 10, || {
        (info_num(&s, "clients", "blocked_clients") == 1).then_some(())
    });
    a.send(&["LPUSH", "src", "x"]);
    assert_eq!(a.next(), int(1));
    assert_eq!(a.next(), invalidate(&["src"]));
    assert_eq!(a.next(), invalidate(&["dst"]));
    assert_eq!(b.next(), bulk("x"));
    a.nothing_pending();

    assert_eq!(b.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(b.cmd(&["GET", "dst2"]), Frame::Null);
    b.send(&["BLMOVE", "src", "dst2", "LEFT", "LEFT", "0"]);
    wait_for("BLMOVE to block again", 10, || {
        (info_num(&s, "clients", "blocked_clients") == 1).then_some(())
    });
    assert_eq!(w.cmd(&["LPUSH", "src", "y"]), int(1));
    assert_eq!(b.next(), bulk("y"));
    assert_eq!(b.next(), invalidate(&["dst2"]));
    b.nothing_pending();
}

#[test]
fn tracking_table_max_keys_forgets_random_keys_with_a_message() {
    let s = own_server(&[]);
    let mut a = Conn::resp3(&s);
    assert_eq!(
        a.cmd(&["CONFIG", "GET", "tracking-table-max-keys"]),
        Frame::Map(vec![(bulk("tracking-table-max-keys"), bulk("1000000"))])
    );
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "2"]),
        ok()
    );
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(
        a.cmd(&["MGET", "a", "b", "c", "d"]),
        arr(vec![Frame::Null, Frame::Null, Frame::Null, Frame::Null])
    );
    // The next command (of any client) brings the table back to its
    // bound before it runs; the keys forgotten are announced as invalid.
    a.send(&["PING"]);
    let mut forgotten = Vec::new();
    for _ in 0..2 {
        match a.next() {
            Frame::Push(v) if v.len() == 2 && v[0] == bulk("invalidate") => match &v[1] {
                Frame::Array(keys) if keys.len() == 1 => forgotten.push(keys[0].clone()),
                f => panic!("unexpected payload {f:?}"),
            },
            f => panic!("expected an invalidation, got {f:?}"),
        }
    }
    assert_eq!(a.next(), pong());
    a.nothing_pending();
    forgotten.sort_by_key(|f| format!("{f:?}"));
    forgotten.dedup();
    assert_eq!(forgotten.len(), 2);
    assert!(forgotten
        .iter()
        .all(|k| ["a", "b", "c", "d"].iter().any(|n| *k == bulk(n))));
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 2);
    assert!(matches!(
        a.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "-1"]),
        Frame::Error(_)
    ));
    // 0: no bound.
    assert_eq!(
        a.cmd(&["CONFIG", "SET", "tracking-table-max-keys", "0"]),
        ok()
    );
    assert_eq!(
        a.cmd(&["MGET", "e", "f", "g"]),
        arr(vec![Frame::Null, Frame::Null, Frame::Null])
    );
    a.nothing_pending();
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 5);
}

#[test]
fn info_counts_clients_keys_items_and_prefixes() {
    let s = own_server(&[]);
    assert_eq!(info_num(&s, "clients", "tracking_clients"), 0);
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 0);
    assert_eq!(info_num(&s, "stats", "tracking_total_items"), 0);
    assert_eq!(info_num(&s, "stats", "tracking_total_prefixes"), 0);
    let mut a = Conn::new(&s);
    let mut b = Conn::new(&s);
    assert_eq!(a.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(b.cmd(&["CLIENT", "TRACKING", "on"]), ok());
    assert_eq!(
        a.cmd(&["MGET", "x", "y"]),
        arr(vec![Frame::Null, Frame::Null])
    );
    assert_eq!(b.cmd(&["GET", "x"]), Frame::Null);
    assert_eq!(info_num(&s, "clients", "tracking_clients"), 2);
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 2);
    assert_eq!(info_num(&s, "stats", "tracking_total_items"), 3);
    // A client that goes leaves its ids until the keys change (as Redis:
    // the table is cleaned lazily).
    drop(b);
    wait_for("the tracking client to go", 10, || {
        (info_num(&s, "clients", "tracking_clients") == 1).then_some(())
    });
    assert_eq!(info_num(&s, "stats", "tracking_total_items"), 3);
    assert_eq!(a.cmd(&["SET", "x", "1"]), ok());
    assert_eq!(info_num(&s, "stats", "tracking_total_keys"), 1);
    assert_eq!(info_num(&s, "stats", "tracking_total_items"), 1);
}

/// redis-py's own client-side cache (`protocol=3, cache_config=...`): a
/// cached GET is served from the cache, and another connection's write
/// invalidates it.
#[test]
fn redis_py_client_side_cache_works() {
    let import = Command::new("python3")
        .args(["-c", "from redis.cache import CacheConfig"])
        .output()
        .expect("python3 is required for this test");
    assert!(
        import.status.success(),
        "redis-py with client-side caching (redis.cache.CacheConfig) is required: {}",
        String::from_utf8_lossy(&import.stderr)
    );
    let s = own_server(&[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/redis_py_cache.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .arg(s.port.to_string())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("client-side cache: OK"), "{text}");
}
