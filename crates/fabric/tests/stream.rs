//! The duplex stream (`ferrokv_fabric::Stream`) over the tcp provider: byte-exact transfers
//! both ways through rings far smaller than the data, pipelined request/response traffic, a
//! reader that stops (the writer's window closes at K slots and reopens), and a peer that
//! goes away mid-stream (an end, never a hang).

mod common;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::stream_io::{pair, read_exact, sleep_on, write_all};
use common::{check_pattern, fill_pattern, library, loopback, PROVIDER, SETUP_TIMEOUT};
use ferrokv_fabric::{Listener, PendingStream, StreamConfig};

const SMALL: StreamConfig = StreamConfig {
    slots: 8,
    slot_size: 4096,
    credit_every: 2,
    inject: true,
    // Selective completions: one write in 4 asks for one.
    signal_every: 4,
};

#[test]
fn a_hundred_megabytes_each_way_through_small_rings_arrive_intact() {
    let Some(lib) = library() else { return };
    let (mut a, mut b) = pair(&lib, SMALL, SMALL);
    const TOTAL: usize = 100 << 20;
    let sender = std::thread::spawn(move || {
        let mut chunk = vec![0u8; 256 * 1024];
        let mut off = 0;
        while off < TOTAL {
            let n = chunk.len().min(TOTAL - off);
            fill_pattern(off as u64, &mut chunk[..n]);
            write_all(&mut a, &chunk[..n]);
            off += n;
        }
        a
    });
    let mut got = vec![0u8; 300 * 1024];
    let mut off = 0usize;
    while off < TOTAL {
        let n = got.len().min(TOTAL - off);
        read_exact(&mut b, &mut got[..n]);
        if let Err(i) = check_pattern(off as u64, &got[..n]) {
            panic!("byte {} differs", off + i);
        }
        off += n;
    }
    let a = sender.join().unwrap();
    assert_eq!(a.stats.bytes_written, TOTAL as u64);
    assert_eq!(b.stats.bytes_read, TOTAL as u64);
    // One slot per write, and the window never held more than K.
    assert!(a.stats.writes >= (TOTAL / SMALL.slot_size as usize) as u64);
    assert!(a.in_flight() <= u64::from(SMALL.slots));
    // Credits came back in groups of `credit_every` slots, not one per slot.
    assert!(b.stats.credits_sent <= a.stats.writes / u64::from(SMALL.credit_every) + 1);
    // Selective completions (the tcp provider takes FI_SELECTIVE_COMPLETION): at most
    // one ring write in `signal_every` asked for a completion, plus the ones that
    // filled the send ring; and yet every slot was reused (100 MB through 32 KiB).
    assert!(a.connection().endpoint.is_selective());
    assert!(
        a.stats.signalled <= a.stats.writes / u64::from(SMALL.signal_every) * 2 + 1,
        "{:?}",
        a.stats
    );
    assert!(a.stats.signalled >= a.stats.writes / u64::from(SMALL.signal_every));
}

#[test]
fn pipelined_requests_and_replies_interleave_both_ways() {
    let Some(lib) = library() else { return };
    // Rings of different shapes on the two sides: each writes the other's slot size at most.
    let client_cfg = StreamConfig {
        slots: 4,
        slot_size: 1024,
        credit_every: 1,
        // This side writes from its send ring only, every write completing; the other
        // injects, and signals one ring write in 4.
        inject: false,
        signal_every: 1,
    };
    let (mut server, mut client) = pair(&lib, SMALL, client_cfg);
    const N: usize = 10_000;
    let echo = std::thread::spawn(move || {
        // Reads "PING i\r\n" lines as they come and answers each with "+PONG i\r\n".
        let mut pending = Vec::new();
        let mut buf = vec![0u8; 8192];
        let mut answered = 0;
        while answered < N {
            match server.read(&mut buf) {
                Ok(0) => panic!("client closed"),
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    sleep_on(&server, SETUP_TIMEOUT);
                    continue;
                }
                Err(e) => panic!("{e}"),
            }
            let mut out = Vec::new();
            while let Some(end) = pending.windows(2).position(|w| w == b"\r\n") {
                let line = pending.drain(..end + 2).collect::<Vec<u8>>();
                let i = std::str::from_utf8(&line[5..line.len() - 2]).unwrap();
                out.extend_from_slice(format!("+PONG {i}\r\n").as_bytes());
                answered += 1;
            }
            write_all(&mut server, &out);
        }
        server
    });
    // All N requests in one go (far more than both rings), then the replies.
    let mut requests = Vec::new();
    for i in 0..N {
        requests.extend_from_slice(format!("PING {i}\r\n").as_bytes());
    }
    let mut expected = Vec::new();
    for i in 0..N {
        expected.extend_from_slice(format!("+PONG {i}\r\n").as_bytes());
    }
    // Write and read at once: a pipeline larger than the rings deadlocks a client that
    // writes everything before reading anything.
    let mut got = Vec::with_capacity(expected.len());
    let mut sent = 0;
    let mut buf = vec![0u8; 8192];
    while got.len() < expected.len() {
        let mut moved = false;
        if sent < requests.len() {
            match client.write(&requests[sent..]) {
                Ok(n) => {
                    sent += n;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        match client.read(&mut buf) {
            Ok(0) => panic!("server closed"),
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                moved = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        if !moved {
            sleep_on(&client, SETUP_TIMEOUT);
        }
    }
    assert_eq!(got, expected);
    let mut server = echo.join().unwrap();
    // Small writes one at a time (replies to unpipelined requests) are
    // injected on the side that may (the tcp provider's inject_size is 128
    // bytes), interleaved with the ring writes above; the other side never
    // injects.
    let before = server.stats.injected;
    let writer = std::thread::spawn(move || {
        for i in 0..100u32 {
            write_all(&mut server, format!(":{i}\r\n").as_bytes());
        }
        write_all(&mut server, &vec![b'z'; 1000]);
        server
    });
    let mut expected = Vec::new();
    for i in 0..100u32 {
        expected.extend_from_slice(format!(":{i}\r\n").as_bytes());
    }
    expected.extend_from_slice(&vec![b'z'; 1000]);
    let mut got = vec![0u8; expected.len()];
    read_exact(&mut client, &mut got);
    assert_eq!(got, expected);
    let server = writer.join().unwrap();
    if server.connection().endpoint.requirements().inject_size >= 8 {
        assert_eq!(server.stats.injected - before, 100);
    }
    assert_eq!(client.stats.injected, 0);
}

#[test]
fn a_reader_that_stops_closes_the_window_at_k_slots_and_reading_reopens_it() {
    let Some(lib) = library() else { return };
    let (mut reader, mut writer) = pair(&lib, SMALL, SMALL);
    let data = vec![7u8; 1 << 20];
    let mut sent = 0;
    let deadline = Instant::now() + SETUP_TIMEOUT;
    // Write until the window is shut; the reader does not read.
    loop {
        match writer.write(&data[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if writer.in_flight() == u64::from(SMALL.slots) {
                    break;
                }
                assert!(Instant::now() < deadline, "window never filled");
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(sent, (SMALL.slots * SMALL.slot_size) as usize);
    assert!(writer.stats.credit_stalls > 0);
    // Still shut a moment later: nothing is written past the reader's ring.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        writer.write(&data[sent..]).unwrap_err().kind(),
        io::ErrorKind::WouldBlock
    );
    // The reader reads it all; the window opens again and the rest goes through.
    let rest = data.len() - sent;
    let reader_thread = std::thread::spawn(move || {
        let mut all = vec![0u8; data.len()];
        read_exact(&mut reader, &mut all);
        all
    });
    write_all(&mut writer, &vec![7u8; rest]);
    let all = reader_thread.join().unwrap();
    assert!(all.iter().all(|&b| b == 7));
}

#[test]
fn a_peer_that_goes_away_mid_stream_ends_the_stream() {
    let Some(lib) = library() else { return };
    let (mut a, mut b) = pair(&lib, SMALL, SMALL);
    write_all(&mut a, b"half a command\r\n$100\r\nabc");
    let mut buf = [0u8; 64];
    read_exact(&mut b, &mut buf[..10]);
    a.shutdown().unwrap();
    drop(a);
    // What landed is still read; then the stream ends (0 or an error), within the limit.
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut rest = Vec::new();
    loop {
        match b.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => rest.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "the stream never ended");
                sleep_on(&b, SETUP_TIMEOUT);
            }
            Err(e) => {
                eprintln!("the stream ended with: {e}");
                break;
            }
        }
    }
    assert_eq!(rest, b"mand\r\n$100\r\nabc".to_vec());
    assert!(b.is_closed());
    assert!(b.write(b"x").is_err());
}

#[test]
fn a_connection_that_is_not_a_stream_is_rejected() {
    let Some(lib) = library() else { return };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let lib2 = Arc::clone(&lib);
    let connector = std::thread::spawn(move || {
        // A full sync's ring (its one-time token), and then bytes that are no ring at all.
        let sync = ferrokv_fabric::RingDescriptor {
            addr: 0,
            key: 0,
            slots: 8,
            slot_size: 4096,
            token: *b"one-time-token!!",
            lane: 0,
            lanes: 1,
        };
        let a = ferrokv_fabric::connect(&lib2, PROVIDER, addr, &sync.encode(), 64, SETUP_TIMEOUT);
        let b =
            ferrokv_fabric::connect(&lib2, PROVIDER, addr, b"GET / HTTP/1.0", 64, SETUP_TIMEOUT);
        (a.is_err(), b.is_err())
    });
    for _ in 0..2 {
        let request = listener.next_request(SETUP_TIMEOUT).unwrap();
        let e = PendingStream::accept(&listener, request, SMALL).unwrap_err();
        assert!(e.to_string().contains("stream"), "{e}");
    }
    assert_eq!(connector.join().unwrap(), (true, true));
}

#[test]
fn pooled_rings_come_back_for_the_next_connection() {
    use ferrokv_fabric::RingPool;
    let Some(lib) = library() else { return };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let pool = RingPool::new(4);
    for round in 0..5u8 {
        let lib2 = Arc::clone(&lib);
        let connector = std::thread::spawn(move || {
            ferrokv_fabric::Stream::connect(&lib2, PROVIDER, addr, SMALL, SETUP_TIMEOUT).unwrap()
        });
        let request = listener.next_request(SETUP_TIMEOUT).unwrap();
        let mut pending = PendingStream::accept_pooled(&listener, request, SMALL, &pool).unwrap();
        let mut server = loop {
            match pending.poll().unwrap() {
                Ok(s) => break s,
                Err(p) => {
                    common::stream_io::wait_fds(&[p.eq_fd()], SETUP_TIMEOUT);
                    pending = p;
                }
            }
        };
        let mut client = connector.join().unwrap();
        // The stream works on reused rings, both ways, byte for byte.
        let msg = vec![round; 20_000];
        write_all(&mut client, &msg);
        let mut got = vec![0u8; msg.len()];
        read_exact(&mut server, &mut got);
        assert_eq!(got, msg);
        write_all(&mut server, &msg);
        read_exact(&mut client, &mut got);
        assert_eq!(got, msg);
        drop(server);
        drop(client);
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.misses, stats.hits, stats.free),
        (1, 4, 1),
        "{stats:?}"
    );
}

#[test]
fn bytes_read_in_place_match_what_was_written_and_their_slots_come_back() {
    let Some(lib) = library() else { return };
    let (mut a, mut b) = pair(&lib, SMALL, SMALL);
    // Ten rings' worth through 8 slots: the writer goes on only if the slots consumed in
    // place are handed back.
    const TOTAL: usize = 10 * 8 * 4096;
    let sender = std::thread::spawn(move || {
        let mut chunk = vec![0u8; 3000];
        let mut off = 0;
        while off < TOTAL {
            let n = chunk.len().min(TOTAL - off);
            fill_pattern(off as u64, &mut chunk[..n]);
            write_all(&mut a, &chunk[..n]);
            off += n;
        }
        a
    });
    let mut off = 0usize;
    let deadline = Instant::now() + SETUP_TIMEOUT;
    while off < TOTAL {
        assert!(Instant::now() < deadline, "stalled at {off}");
        let Some(view) = b.peek() else {
            sleep_on(&b, Duration::from_millis(100));
            continue;
        };
        assert!(!view.is_empty() && view.len() <= SMALL.slot_size as usize);
        // Half a slot at a time: the rest stays for the next peek.
        // (On 8-byte boundaries: the pattern is checked in words.)
        let half = (view.len().div_ceil(2).div_ceil(8) * 8).min(view.len());
        if let Err(i) = check_pattern(off as u64, &view[..half]) {
            panic!("byte {} differs", off + i);
        }
        b.consume(half).unwrap();
        off += half;
    }
    let a = sender.join().unwrap();
    assert_eq!(b.stats.read_in_place, TOTAL as u64);
    assert_eq!(b.stats.bytes_read, TOTAL as u64);
    assert_eq!(a.stats.bytes_written, TOTAL as u64);
    // Nothing is left, and the ordinary read finds nothing either.
    assert!(b.peek().is_none());
    let mut one = [0u8; 1];
    assert_eq!(
        b.read(&mut one).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}
