//! RAII closes children before parents whatever order handles are dropped in, and a buffer the
//! provider may still write stays allocated until the endpoint is closed. Guards against
//! `-FI_EBUSY` closes (a queue closed under a bound endpoint) and use-after-free of posted
//! buffers. Its own test binary: `close_failures()` is process-wide.

mod common;

use std::thread;

use common::*;
use ferrokv_fabric::{close_failures, connect, Access, CompletionKind, Listener};

#[test]
fn handles_dropped_parents_first_still_close_children_first_without_errors() {
    let Some(lib) = library() else { return };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let peer = thread::spawn(move || {
        let request = listener.next_request(SETUP_TIMEOUT).unwrap();
        let conn = listener.accept(request, b"", 64, SETUP_TIMEOUT).unwrap();
        let mut msg = conn.domain.register(16, Access::SEND).unwrap();
        msg.bytes_mut(0..16)
            .unwrap()
            .copy_from_slice(b"into a dropped h");
        go_rx.recv().unwrap();
        conn.endpoint.send(&msg, 0..16, 1).unwrap();
        let mut done = Vec::new();
        while done.is_empty() {
            conn.cq.wait(STALL_TIMEOUT).unwrap();
            conn.cq.read(&mut done, 4).unwrap();
        }
        go_rx.recv().unwrap();
        // Listener side: drop in declaration order, EQ/fabric handles before the endpoint.
        drop(conn);
        drop(listener);
    });

    let conn = connect(&lib, PROVIDER, addr, b"", 64, SETUP_TIMEOUT).unwrap();
    let target = conn.domain.register(64, Access::RECV).unwrap();
    conn.endpoint.recv(&target, 0..64, 5).unwrap();
    // Drop the region's handle while the receive is posted: the endpoint keeps the buffer.
    drop(target);
    go_tx.send(()).unwrap();
    let mut got = Vec::new();
    while got.is_empty() {
        conn.cq.wait(STALL_TIMEOUT).unwrap();
        conn.cq.read(&mut got, 4).unwrap();
    }
    assert_eq!(
        (got[0].tag, got[0].len, got[0].kind()),
        (5, 16, CompletionKind::Recv)
    );
    go_tx.send(()).unwrap();
    peer.join().unwrap();

    // Parents' handles first, the endpoint last: the Arcs still close ep → cq/eq → domain → fabric.
    let ferrokv_fabric::Connection {
        fabric,
        domain,
        eq,
        cq,
        endpoint,
        ..
    } = conn;
    drop(fabric);
    drop(domain);
    drop(cq);
    drop(eq);
    drop(endpoint);
    assert_eq!(close_failures(), 0, "every fi_close succeeded");
}
