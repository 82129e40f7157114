//! What the survivor sees when things go wrong — never a hang: a write under a wrong key, a
//! peer process killed mid-transfer (either side), a connection to nobody, oversized private
//! data, an unknown provider. Each failure must come back as a decoded, readable error.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::*;
use ferrokv_fabric::{connect, Connection, FabricError, Hints, Info, Listener, MAX_PRIVATE_DATA};

const PEER_ROLE_ENV: &str = "FERROKV_FABRIC_TEST_PEER";
const PEER_ADDR_ENV: &str = "FERROKV_FABRIC_TEST_PEER_ADDR";
/// Effectively endless: the transfer only stops when a process is killed.
const ENDLESS: u64 = 1 << 40;
const CHUNKS_BEFORE_KILL: u64 = 64;

fn endless_config() -> RingConfig {
    RingConfig {
        slots: 8,
        slot_size: 256 << 10,
        total: ENDLESS,
        window: 8,
    }
}

/// Not a test of its own: the body of the peer process the tests below spawn and kill.
#[test]
fn peer_process_entry() {
    let Ok(role) = std::env::var(PEER_ROLE_ENV) else {
        return;
    };
    let lib = library().expect("the parent checked libfabric");
    match role.as_str() {
        "sender" => {
            let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
            println!("ADDR {}", listener.local_addr().unwrap());
            let mut sender = RingSender::accept(&listener, 8, TEST_TOKEN).unwrap();
            let result = sender.run(ENDLESS, &mut Waiter::Fd, None, None);
            panic!("the sender should have been killed, but returned {result:?}");
        }
        "receiver" => {
            let addr: SocketAddr = std::env::var(PEER_ADDR_ENV).unwrap().parse().unwrap();
            let mut receiver =
                RingReceiver::connect(&lib, addr, endless_config(), TEST_TOKEN).unwrap();
            let result = receiver.run(&mut Waiter::Fd, |_, _| Ok(()));
            panic!("the receiver should have been killed, but returned {result:?}");
        }
        other => panic!("unknown peer role {other}"),
    }
}

fn spawn_peer(role: &str, addr: Option<SocketAddr>) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "peer_process_entry",
        "--exact",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(PEER_ROLE_ENV, role)
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    if let Some(addr) = addr {
        cmd.env(PEER_ADDR_ENV, addr.to_string());
    }
    cmd.spawn().unwrap()
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn receiver_survives_a_sender_process_killed_mid_transfer() {
    let Some(lib) = library() else { return };
    let mut child = KillOnDrop(spawn_peer("sender", None));
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let addr: SocketAddr = stdout
        .lines()
        .map(Result::unwrap)
        // The harness prints "test peer_process_entry ... " on the same line.
        .find_map(|line| {
            line.split_once("ADDR ")
                .map(|(_, a)| a.trim().parse().unwrap())
        })
        .expect("the sender process prints its address");
    let mut receiver = RingReceiver::connect(&lib, addr, endless_config(), TEST_TOKEN).unwrap();
    let mut killed_at = None;
    let result = receiver.run(&mut Waiter::Fd, |seq, _| {
        if seq == CHUNKS_BEFORE_KILL {
            child.0.kill().unwrap();
            child.0.wait().unwrap();
            killed_at = Some(Instant::now());
        }
        Ok(())
    });
    let err = result.expect_err("the transfer cannot finish once the sender is dead");
    let noticed = killed_at.expect("killed mid-transfer").elapsed();
    eprintln!("receiver saw: {err} ({noticed:?} after the kill)");
    assert!(
        noticed < STALL_TIMEOUT,
        "took {noticed:?}: that is a stall, not a detection"
    );
    assert!(
        err.contains("FI_SHUTDOWN") || err.contains("completion error"),
        "expected a shutdown event or an error completion, got: {err}"
    );
}

#[test]
fn sender_survives_a_receiver_process_killed_mid_transfer() {
    let Some(lib) = library() else { return };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let mut child = KillOnDrop(spawn_peer("receiver", Some(listener.local_addr().unwrap())));
    let mut sender = RingSender::accept(&listener, 8, TEST_TOKEN).unwrap();
    let chunk = u64::from(sender.ring.slot_size);
    let mut killed_at = None;
    let mut fill = |offset: u64, _: &mut [u8]| {
        if offset == CHUNKS_BEFORE_KILL * chunk {
            child.0.kill().unwrap();
            child.0.wait().unwrap();
            killed_at = Some(Instant::now());
        }
    };
    let result = sender.run(ENDLESS, &mut Waiter::Fd, Some(&mut fill), None);
    let err = result.expect_err("the transfer cannot finish once the receiver is dead");
    let noticed = killed_at.expect("killed mid-transfer").elapsed();
    eprintln!("sender saw: {err} ({noticed:?} after the kill)");
    assert!(
        noticed < STALL_TIMEOUT,
        "took {noticed:?}: that is a stall, not a detection"
    );
    assert!(
        err.contains("FI_SHUTDOWN") || err.contains("completion error"),
        "expected a shutdown event or an error completion, got: {err}"
    );
}

#[test]
fn write_with_a_wrong_key_ends_in_decoded_error_completions() {
    let Some(lib) = library() else { return };
    let config = RingConfig {
        slots: 4,
        slot_size: 64 << 10,
        total: 1 << 20,
        window: 4,
    };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let sender = thread::spawn(move || {
        let mut sender = RingSender::accept(&listener, config.window, TEST_TOKEN).unwrap();
        let wrong_key = sender.ring.key ^ 0x5a5a_5a5a;
        let start = Instant::now();
        let result = sender.run(config.total, &mut Waiter::Fd, None, Some(wrong_key));
        // tcp completes a write locally once sent; the target refuses the key and drops the
        // connection, which flushes every operation still posted with an error completion.
        let mut errors = Vec::new();
        while errors.is_empty() && start.elapsed() < STALL_TIMEOUT {
            let mut ok = Vec::new();
            match sender.conn.cq.read(&mut ok, 16) {
                Err(FabricError::Completion(e)) => errors.push(e),
                Err(e) => panic!("reading the CQ failed: {e}"),
                Ok(_) => thread::sleep(Duration::from_millis(1)),
            }
        }
        (result, errors, start.elapsed())
    });
    let mut receiver = RingReceiver::connect(&lib, addr, config, TEST_TOKEN).unwrap();
    let received = receiver.run(&mut Waiter::Fd, |seq, _| {
        Err(format!("chunk {seq} landed under a wrong key"))
    });
    let (sent, errors, took) = sender.join().unwrap();
    eprintln!("sender: {sent:?}; flushed: {errors:?}; receiver: {received:?}");
    let sent_err = sent.expect_err("a write under a wrong key must not succeed");
    assert!(took < STALL_TIMEOUT, "the error took {took:?}");
    assert!(
        sent_err.contains("completion error") || sent_err.contains("FI_SHUTDOWN"),
        "{sent_err}"
    );
    let e = errors
        .first()
        .expect("at least one error completion after the refused write");
    // Canceled (flushed) or not connected (posted as the connection went), depending on timing.
    assert!(
        [
            libc::ECANCELED,
            libc::ENOTCONN,
            libc::ECONNRESET,
            libc::EPIPE
        ]
        .contains(&e.err),
        "an error of the teardown: {e}"
    );
    assert!(
        e.message.starts_with(&lib.strerror(e.err)) && e.message.len() > 10,
        "decoded with fi_strerror + fi_cq_strerror: {e}"
    );
    assert!(e.to_string().starts_with("completion error"));
    let received_err = received.expect_err("no chunk may land under a wrong key");
    assert!(received_err.contains("FI_SHUTDOWN"), "{received_err}");
}

#[test]
fn connecting_to_a_port_nobody_listens_on_is_refused_with_a_decoded_event() {
    let Some(lib) = library() else { return };
    // Bind and drop a socket to find a port with no listener.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let start = Instant::now();
    let err = connect(&lib, PROVIDER, addr, b"hello", 64, SETUP_TIMEOUT).unwrap_err();
    eprintln!("{err}");
    assert!(
        start.elapsed() < SETUP_TIMEOUT,
        "refusal must not wait for the timeout"
    );
    match err {
        FabricError::Event(e) => {
            assert_eq!(e.err, libc::ECONNREFUSED, "{e}");
            assert!(e.message.to_lowercase().contains("refused"), "{e}");
        }
        other => panic!("expected an event-queue error, got {other}"),
    }
}

#[test]
fn private_data_beyond_the_verbs_limit_is_refused_before_connecting() {
    let Some(lib) = library() else { return };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let mut conn = Connection::prepare(&lib, PROVIDER, listener.local_addr().unwrap(), 64).unwrap();
    let err = conn
        .connect(&[0u8; MAX_PRIVATE_DATA + 1], SETUP_TIMEOUT)
        .unwrap_err();
    assert!(matches!(err, FabricError::Invalid(_)), "{err}");
    assert!(err.to_string().contains("at most 55"), "{err}");
}

#[test]
fn unknown_provider_name_reports_rdma_unavailable() {
    let Some(lib) = library() else { return };
    let err = Info::get(&lib, &Hints::listen(Some("no-such-provider"), loopback())).unwrap_err();
    assert!(matches!(err, FabricError::Unavailable(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("RDMA unavailable: no libfabric provider named \"no-such-provider\""),
        "{err}"
    );
}

#[test]
fn connection_with_an_unknown_token_is_rejected_and_the_connector_is_refused() {
    let Some(lib) = library() else { return };
    let config = RingConfig {
        slots: 4,
        slot_size: 4096,
        total: 4096,
        window: 4,
    };
    let listener = Listener::bind(&lib, PROVIDER, loopback()).unwrap();
    let addr = listener.local_addr().unwrap();
    let master = thread::spawn(move || match RingSender::accept(&listener, 4, TEST_TOKEN) {
        Err(FabricError::Invalid(why)) => why,
        Err(other) => panic!("a foreign token must be refused as invalid, got {other}"),
        Ok(_) => panic!("a foreign token was accepted"),
    });
    let start = Instant::now();
    let err = match RingReceiver::connect(&lib, addr, config, *b"not-the-token!!!") {
        Err(e) => e,
        Ok(_) => panic!("connected with a token the master never issued"),
    };
    assert!(
        start.elapsed() < SETUP_TIMEOUT,
        "the refusal must not wait for a timeout"
    );
    match &err {
        FabricError::Event(e) => assert_eq!(e.err, libc::ECONNREFUSED, "{e}"),
        other => panic!("expected a refused connection event, got {other}"),
    }
    assert_eq!(master.join().unwrap(), "connection with an unknown token");
}
