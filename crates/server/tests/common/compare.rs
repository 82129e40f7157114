//! Running the same commands on ferrokv and a reference server and
//! comparing the reply bytes (the newer forms of issue #42).

use super::{Peer, ServerProcess};
use ferrokv_resp::Frame;

/// ferrokv (with `extra`) and, when this clone has it, Redis 7.4.1.
pub fn with_redis_7_4(extra: &[&str]) -> Vec<ServerProcess> {
    let mut v = vec![ServerProcess::ferrokv(extra)];
    v.extend(ServerProcess::peer(Peer::Redis74, &[]));
    v
}

/// Runs `setup` then `cmds` on every server, in RESP2 and then RESP3, and
/// asserts that the replies are the same bytes on each; returns the first
/// server's RESP2 replies.
pub fn same_replies(servers: &[ServerProcess], setup: &[&[&str]], cmds: &[&[&str]]) -> Vec<Frame> {
    let mut first: Option<(String, Vec<Vec<u8>>)> = None;
    let mut frames = Vec::new();
    for (n, s) in servers.iter().enumerate() {
        let mut got = Vec::new();
        for resp3 in [false, true] {
            let mut r = s.raw();
            if resp3 {
                assert!(matches!(r.cmd(&["HELLO", "3"]), Frame::Map(_)));
            }
            r.cmd(&["FLUSHALL"]);
            for c in setup {
                let f = r.cmd(c);
                assert!(!matches!(f, Frame::Error(_)), "{} {c:?}: {f:?}", s.name);
            }
            for c in cmds {
                let (f, bytes) = r.try_cmd_bytes(c).unwrap();
                if !resp3 && n == 0 {
                    frames.push(f);
                }
                got.push(bytes);
            }
        }
        match &first {
            None => first = Some((s.name.to_string(), got)),
            Some((name, want)) => {
                for (i, (a, b)) in want.iter().zip(&got).enumerate() {
                    let c = cmds[i % cmds.len()];
                    assert_eq!(
                        String::from_utf8_lossy(a),
                        String::from_utf8_lossy(b),
                        "{c:?} ({}): {name} and {} differ",
                        if i < cmds.len() { "RESP2" } else { "RESP3" },
                        s.name
                    );
                }
            }
        }
    }
    frames
}
