//! Blocking helpers over the non-blocking `Stream`: wait on its fds (after `fi_trywait`),
//! write or read everything, set up a connected pair in one process.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{loopback, PROVIDER, SETUP_TIMEOUT};
use ferrokv_fabric::{Library, Listener, PendingStream, Stream, StreamConfig};

/// Sleeps until one of the stream's fds is readable (after `fi_trywait` allowed it), at most
/// `limit`: with work outstanding, a timeout means a lost wake-up.
pub fn sleep_on(s: &Stream, limit: Duration) {
    if !s.trywait().unwrap() {
        return;
    }
    wait_fds(&s.fds(), limit);
}

pub fn wait_fds(fds: &[RawFd], limit: Duration) {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: valid pollfds.
    let ret = unsafe { libc::poll(p.as_mut_ptr(), p.len() as _, limit.as_millis() as i32) };
    assert!(ret > 0, "nothing arrived within {limit:?}");
}

pub fn write_all(s: &mut Stream, mut buf: &[u8]) {
    while !buf.is_empty() {
        let n = s
            .write_blocking(buf, Some(SETUP_TIMEOUT))
            .unwrap_or_else(|e| panic!("write: {e}"));
        buf = &buf[n..];
    }
}

pub fn read_exact(s: &mut Stream, buf: &mut [u8]) {
    let mut at = 0;
    while at < buf.len() {
        match s.read_blocking(&mut buf[at..], Some(SETUP_TIMEOUT)) {
            Ok(0) => panic!("the peer closed after {at} of {} bytes", buf.len()),
            Ok(n) => at += n,
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// A connected pair: (the listener's side, the connector's side).
pub fn pair(lib: &Arc<Library>, server: StreamConfig, client: StreamConfig) -> (Stream, Stream) {
    let listener = Listener::bind(lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let lib2 = Arc::clone(lib);
    let connector = std::thread::spawn(move || {
        Stream::connect(&lib2, PROVIDER, addr, client, SETUP_TIMEOUT).unwrap()
    });
    let request = listener.next_request(SETUP_TIMEOUT).unwrap();
    let mut pending = PendingStream::accept(&listener, request, server).unwrap();
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let accepted = loop {
        match pending.poll().unwrap() {
            Ok(s) => break s,
            Err(p) => {
                assert!(Instant::now() < deadline, "no FI_CONNECTED");
                wait_fds(&[p.eq_fd()], SETUP_TIMEOUT);
                pending = p;
            }
        }
    };
    (accepted, connector.join().unwrap())
}
