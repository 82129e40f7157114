//! Reply builders and checks shared by the per-family suites (`hashes.rs`,
//! `sets.rs`, `lists.rs`, ...), which also run against the real
//! redis-server with `FERROKV_TESTS_TARGET=redis`.
use super::{Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::sync::Arc;

pub fn against_redis() -> bool {
    std::env::var("FERROKV_TESTS_TARGET").as_deref() == Ok("redis")
}

pub fn server() -> Arc<ServerProcess> {
    if against_redis() {
        Arc::new(ServerProcess::redis(&[]))
    } else {
        super::shared_ferrokv()
    }
}

/// A server of its own of the target under test (ferrokv, or redis-server
/// with `FERROKV_TESTS_TARGET=redis`), for a test that changes its config
/// or needs it fresh.
pub fn own_server(ferrokv_args: &[&str]) -> ServerProcess {
    if against_redis() {
        ServerProcess::redis(&[])
    } else {
        ServerProcess::ferrokv(ferrokv_args)
    }
}

pub fn ok() -> Frame {
    Frame::Simple(b"OK".to_vec())
}

pub fn nil() -> Frame {
    Frame::Null
}

pub fn bulk(s: &str) -> Frame {
    Frame::Bulk(s.as_bytes().to_vec())
}

pub fn int(i: i64) -> Frame {
    Frame::Integer(i)
}

pub fn err(s: &str) -> Frame {
    Frame::Error(s.as_bytes().to_vec())
}

pub fn arr(v: Vec<Frame>) -> Frame {
    Frame::Array(v)
}

pub fn bulks(v: &[&str]) -> Frame {
    arr(v.iter().map(|s| bulk(s)).collect())
}

pub fn check(r: &mut Raw, cases: &[(&[&str], Frame)]) {
    for (args, expected) in cases {
        let got = r.cmd(args);
        assert_eq!(&got, expected, "{args:?}");
    }
}
