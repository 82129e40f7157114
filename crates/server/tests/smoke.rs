//! Guards the harness itself: the real binary starts, answers PING over
//! raw RESP and through the `redis` crate, and stops on drop.
mod common;
use common::ServerProcess;

#[test]
fn server_answers_ping_raw_and_with_client() {
    let s = ServerProcess::ferrokv(&[]);
    let mut raw = s.raw();
    raw.roundtrip(b"*1\r\n$4\r\nPING\r\n", b"+PONG\r\n");
    let mut c = s.client();
    let pong: String = redis::cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}
