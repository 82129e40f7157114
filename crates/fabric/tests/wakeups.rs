//! Waiting without spinning: the EQ/CQ fds wake a mio poll (edge-triggered), and the loop
//! "drain until -FI_EAGAIN, then fi_trywait, sleep only if it says so" never strands a
//! completion. Guards against lost wake-ups, which show up as a transfer that stalls.

mod common;

use std::thread;
use std::time::Duration;

use common::*;
use ferrokv_fabric::{Access, CmEvent, CompletionKind, Listener};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::os::fd::AsRawFd;

/// xorshift64*: reproducible jitter without a dependency.
struct Jitter(u64);

impl Jitter {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[test]
fn edge_triggered_mio_loops_with_trywait_never_strand_a_completion() {
    let Some(lib) = library() else { return };
    // Many small chunks, a window smaller than the ring, and irregular pauses on the sender so
    // completions arrive in every pattern: singly, in bursts, while the receiver is mid-drain,
    // just after it drained, while it is asleep.
    let config = RingConfig {
        slots: 16,
        slot_size: 4096,
        total: 20_000 * 4096,
        window: 12,
    };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = thread::spawn(move || {
        let mut sender = RingSender::accept(&listener, config.window, TEST_TOKEN).unwrap();
        let mut waiter = Waiter::mio(&sender.conn);
        let mut jitter = Jitter(0x9E37_79B9_7F4A_7C15);
        let mut fill = |offset: u64, buf: &mut [u8]| {
            fill_pattern(offset, buf);
            let r = jitter.next();
            if r & 15 == 0 {
                thread::sleep(Duration::from_micros(r % 400));
            }
        };
        let credited = sender
            .run(config.total, &mut waiter, Some(&mut fill), None)
            .unwrap();
        (credited, waiter)
    });
    let mut receiver = RingReceiver::connect(&lib, addr, config, TEST_TOKEN).unwrap();
    let mut waiter = Waiter::mio(&receiver.conn);
    let mut jitter = Jitter(42);
    let stats = receiver
        .run(&mut waiter, |seq, bytes| {
            check_pattern(seq * 4096, bytes).map_err(|at| format!("chunk {seq}: byte {at}"))?;
            let r = jitter.next();
            if r & 31 == 0 {
                thread::sleep(Duration::from_micros(r % 300));
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(stats.chunks, 20_000);
    let (credited, sender_waiter) = sender.join().unwrap();
    assert_eq!(credited, 20_000);
    for (side, w) in [("receiver", &waiter), ("sender", &sender_waiter)] {
        let Waiter::Mio {
            wakeups,
            trywait_refusals,
            ..
        } = w
        else {
            unreachable!()
        };
        eprintln!("{side}: {wakeups} mio wake-ups, {trywait_refusals} trywait refusals");
        assert!(
            *wakeups > 0,
            "the {side} slept and was woken through its fds"
        );
    }
}

#[test]
fn cq_fd_wakes_mio_when_a_message_lands_in_a_posted_receive() {
    let Some(lib) = library() else { return };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let sender = thread::spawn(move || {
        let request = listener.next_request(SETUP_TIMEOUT).unwrap();
        let conn = listener.accept(request, b"", 64, SETUP_TIMEOUT).unwrap();
        let mut msg = conn.domain.register(64, Access::SEND).unwrap();
        msg.bytes_mut(0..5).unwrap().copy_from_slice(b"wake!");
        go_rx.recv().unwrap();
        // Let the receiver be asleep in mio before the message goes out.
        thread::sleep(Duration::from_millis(50));
        conn.endpoint.send(&msg, 0..5, 9).unwrap();
        let mut done = Vec::new();
        while done.is_empty() {
            conn.cq.wait(STALL_TIMEOUT).unwrap();
            conn.cq.read(&mut done, 4).unwrap();
        }
        assert_eq!(done[0].kind(), CompletionKind::Send);
        // Keep the connection until the receiver has read the message.
        go_rx.recv().unwrap();
    });
    let conn = ferrokv_fabric::connect(&lib, PROVIDER, addr, b"", 64, SETUP_TIMEOUT).unwrap();
    let buf = conn.domain.register(64, Access::RECV).unwrap();
    conn.endpoint.recv(&buf, 0..64, 7).unwrap();

    let mut poll = Poll::new().unwrap();
    let fd = conn.cq.as_raw_fd();
    poll.registry()
        .register(&mut SourceFd(&fd), Token(0), Interest::READABLE)
        .unwrap();
    let mut events = Events::with_capacity(4);
    let mut got = Vec::new();
    assert_eq!(conn.cq.read(&mut got, 4).unwrap(), 0, "nothing yet");
    assert!(
        conn.cq.trywait().unwrap(),
        "an empty, drained CQ lets the loop sleep"
    );
    go_tx.send(()).unwrap();
    let mut wakeups = 0;
    while got.is_empty() {
        if conn.cq.trywait().unwrap() {
            poll.poll(&mut events, Some(STALL_TIMEOUT)).unwrap();
            assert!(
                !events.is_empty(),
                "mio was not woken within {STALL_TIMEOUT:?}"
            );
            wakeups += 1;
        }
        conn.cq.read(&mut got, 4).unwrap();
    }
    assert!(wakeups >= 1);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].tag, got[0].len, got[0].kind()),
        (7, 5, CompletionKind::Recv)
    );
    assert_eq!(buf.bytes(0..5), b"wake!");
    go_tx.send(()).unwrap();
    sender.join().unwrap();
}

#[test]
fn peer_shutdown_wakes_mio_through_the_queue_fds_and_arrives_as_fi_shutdown() {
    let Some(lib) = library() else { return };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = thread::spawn(move || {
        let request = listener.next_request(SETUP_TIMEOUT).unwrap();
        let conn = listener
            .accept(request, b"bye soon", 64, SETUP_TIMEOUT)
            .unwrap();
        thread::sleep(Duration::from_millis(50));
        conn.endpoint.shutdown().unwrap();
        conn
    });
    let conn = ferrokv_fabric::connect(&lib, PROVIDER, addr, b"hi", 64, SETUP_TIMEOUT).unwrap();
    assert_eq!(conn.peer_data, b"bye soon");
    // As in the server's reactor: both fds registered, both queues drained each turn. With the
    // tcp provider the peer's disconnect is noticed while the CQ is driven (manual progress),
    // and only then does the EQ get its FI_SHUTDOWN.
    let mut poll = Poll::new().unwrap();
    let (eq_fd, cq_fd) = (conn.eq.as_raw_fd(), conn.cq.as_raw_fd());
    poll.registry()
        .register(&mut SourceFd(&eq_fd), Token(1), Interest::READABLE)
        .unwrap();
    poll.registry()
        .register(&mut SourceFd(&cq_fd), Token(2), Interest::READABLE)
        .unwrap();
    let mut events = Events::with_capacity(4);
    let mut completions = Vec::new();
    let event = loop {
        assert_eq!(
            conn.cq.read(&mut completions, 16).unwrap(),
            0,
            "no traffic on this connection"
        );
        if let Some(event) = conn.eq.read().unwrap() {
            break event;
        }
        if conn.fabric.trywait(&[&conn.cq, &conn.eq]).unwrap() {
            poll.poll(&mut events, Some(STALL_TIMEOUT)).unwrap();
            assert!(
                !events.is_empty(),
                "no wake-up for the shutdown within {STALL_TIMEOUT:?}"
            );
        }
    };
    match event {
        CmEvent::Shutdown { id } => assert_eq!(id, conn.endpoint.id()),
        other => panic!("expected FI_SHUTDOWN, got {other:?}"),
    }
    drop(acceptor.join().unwrap());
}

#[test]
fn trywait_refuses_to_sleep_while_a_partially_drained_cq_still_holds_completions() {
    let Some(lib) = library() else { return };
    const MESSAGES: usize = 8;
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let sender = thread::spawn(move || {
        let request = listener.next_request(SETUP_TIMEOUT).unwrap();
        let conn = listener.accept(request, b"", 64, SETUP_TIMEOUT).unwrap();
        let mut msg = conn.domain.register(MESSAGES * 8, Access::SEND).unwrap();
        for i in 0..MESSAGES {
            msg.bytes_mut(i * 8..i * 8 + 8)
                .unwrap()
                .copy_from_slice(&(i as u64).to_le_bytes());
            conn.endpoint
                .send(&msg, i * 8..i * 8 + 8, i as u64)
                .unwrap();
        }
        let mut sent = Vec::new();
        while sent.len() < MESSAGES {
            conn.cq.wait(STALL_TIMEOUT).unwrap();
            conn.cq.read(&mut sent, 16).unwrap();
        }
        done_rx.recv().unwrap();
    });
    let conn = ferrokv_fabric::connect(&lib, PROVIDER, addr, b"", 64, SETUP_TIMEOUT).unwrap();
    let buf = conn.domain.register(MESSAGES * 8, Access::RECV).unwrap();
    for i in 0..MESSAGES {
        conn.endpoint
            .recv(&buf, i * 8..i * 8 + 8, i as u64)
            .unwrap();
    }
    // Wait until all messages have been progressed into the CQ, reading only one entry.
    let mut got = Vec::new();
    while got.is_empty() {
        conn.cq.wait(STALL_TIMEOUT).unwrap();
        conn.cq.read(&mut got, 1).unwrap();
    }
    thread::sleep(Duration::from_millis(100));
    // The loop bug this guards against: sleeping after a partial drain. The remaining entries
    // will not make the fd fire again; fi_trywait is what says "read first".
    assert!(
        !conn.cq.trywait().unwrap(),
        "fi_trywait must refuse to sleep while completions are queued"
    );
    // Draining until -FI_EAGAIN empties it; then sleeping is allowed.
    let mut rest = Vec::new();
    while got.len() + rest.len() < MESSAGES {
        if conn.cq.read(&mut rest, 16).unwrap() == 0 && conn.cq.trywait().unwrap() {
            conn.cq.wait(STALL_TIMEOUT).unwrap();
        }
    }
    assert_eq!(conn.cq.read(&mut rest, 16).unwrap(), 0);
    assert!(conn.cq.trywait().unwrap(), "drained: safe to sleep");
    let tags: Vec<u64> = got.iter().chain(&rest).map(|c| c.tag).collect();
    assert_eq!(
        tags,
        (0..MESSAGES as u64).collect::<Vec<_>>(),
        "in order, none lost"
    );
    done_tx.send(()).unwrap();
    sender.join().unwrap();
}
