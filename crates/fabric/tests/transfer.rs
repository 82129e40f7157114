//! The RDMA sync's data path end to end over the tcp provider on 127.0.0.1: connection with
//! private data both ways, then 256 MB pushed with `fi_writedata` into a K×C ring under the
//! credit window returned by `fi_send`, every byte and every immediate checked.
//! Guards against: lost or reordered immediates, slot reuse before its credit, torn chunks,
//! private data lost in either direction.

mod common;

use std::thread;
use std::time::Instant;

use common::*;
use ferrokv_fabric::{AcceptDescriptor, Listener};

#[test]
fn ring_transfer_of_256_mb_verifies_every_byte_and_immediate_in_order() {
    let Some(lib) = library() else { return };
    let config = RingConfig {
        slots: 8,
        slot_size: 1 << 20,
        total: 256 << 20,
        window: 8,
    };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    assert_ne!(addr.port(), 0, "fi_getname reports the bound port");

    let sender = thread::spawn(move || {
        let mut sender = RingSender::accept(&listener, config.window, TEST_TOKEN).unwrap();
        // The connector's private data arrived intact.
        assert_eq!(sender.ring.slots, config.slots);
        assert_eq!(sender.ring.slot_size, config.slot_size);
        assert_eq!(sender.ring.token, TEST_TOKEN);
        let mut fill = |offset: u64, buf: &mut [u8]| fill_pattern(offset, buf);
        let credited = sender
            .run(config.total, &mut Waiter::Fd, Some(&mut fill), None)
            .unwrap();
        assert_eq!(credited, config.chunks());
        sender
    });

    let start = Instant::now();
    let mut receiver = RingReceiver::connect(&lib, addr, config, TEST_TOKEN).unwrap();
    // The acceptor's private data arrived intact.
    let reply = AcceptDescriptor::decode(&receiver.conn.peer_data).unwrap();
    assert_eq!(reply.token, TEST_TOKEN);
    assert_eq!(reply.window, config.window);

    let slot_size = u64::from(config.slot_size);
    let stats = receiver
        .run(&mut Waiter::Fd, |seq, bytes| {
            check_pattern(seq * slot_size, bytes)
                .map_err(|at| format!("chunk {seq}: byte {at} differs"))
        })
        .unwrap();
    let elapsed = start.elapsed();
    assert_eq!(stats.chunks, 256);
    assert_eq!(stats.bytes, 256 << 20);
    let _sender = sender.join().unwrap();
    eprintln!(
        "256 MB in {elapsed:?} ({:.2} GB/s) including connection setup",
        stats.bytes as f64 / elapsed.as_secs_f64() / 1e9
    );
}

#[test]
fn ragged_tail_chunk_is_delivered_with_its_exact_length() {
    let Some(lib) = library() else { return };
    // 3 slots of 64 KiB, a total that is not a multiple of the slot size, window < K.
    let config = RingConfig {
        slots: 3,
        slot_size: 64 << 10,
        total: (10 << 20) + 12_345,
        window: 2,
    };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = thread::spawn(move || {
        let mut sender = RingSender::accept(&listener, config.window, TEST_TOKEN).unwrap();
        assert_eq!(sender.window, 2);
        let mut fill = |offset: u64, buf: &mut [u8]| fill_pattern(offset, buf);
        sender
            .run(config.total, &mut Waiter::Fd, Some(&mut fill), None)
            .unwrap()
    });
    let mut receiver = RingReceiver::connect(&lib, addr, config, TEST_TOKEN).unwrap();
    let slot_size = u64::from(config.slot_size);
    let mut lengths = Vec::new();
    let stats = receiver
        .run(&mut Waiter::Fd, |seq, bytes| {
            lengths.push(bytes.len());
            check_pattern(seq * slot_size, bytes).map_err(|at| format!("chunk {seq}: byte {at}"))
        })
        .unwrap();
    assert_eq!(stats.bytes, config.total);
    assert_eq!(*lengths.last().unwrap(), 12_345);
    assert_eq!(sender.join().unwrap(), config.chunks());
}
