//! Guards the cluster bus codec (`cluster/bus.rs`) against the real
//! redis-server 7.0 in cluster mode, on its bus port: our MEET is accepted
//! and answered with a PONG we decode field by field; Redis then connects
//! to the bus port we announced and PINGs; our PONGs complete the
//! handshake, so Redis lists our node under our id, address and hostname
//! in `CLUSTER NODES`, and the nodes.conf it writes reads back through our
//! parser byte for byte. What Redis accepts and what it sends both go
//! through the codec, and ours are built from our node table
//! (`cluster/state.rs`).
mod common;
use common::{wait_for, ServerProcess, FREE_PORT};
use ferrokv_server::cluster::bus::{self, kind, node_flags, Body, Ext, Message, NULL_NAME};
use ferrokv_server::cluster::nodes::NodesConf;
use ferrokv_server::cluster::state::{Announce, ClusterState};
use ferrokv_store::slots::key_slot;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

const OUR_NAME: &[u8; 40] = b"fe770c0ffee0000000000000000000000000beef";
const OUR_CLIENT_PORT: u16 = 7777;

fn redis_cluster_node() -> ServerProcess {
    ServerProcess::redis(&[
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        FREE_PORT,
        "--cluster-announce-hostname",
        "redis-node.test",
    ])
}

/// Our node: a fresh table (a master without slots) and what it announces.
fn our_node(cport: u16) -> (ClusterState, Announce) {
    let st = ClusterState::new(*OUR_NAME, 15_000);
    let me = Announce {
        ip: "127.0.0.1".into(),
        port: OUR_CLIENT_PORT,
        cport,
        hostname: "ferrokv-node.test".into(),
        ..Announce::default()
    };
    (st, me)
}

/// Reads one whole bus message.
fn read_message(s: &mut TcpStream) -> Message {
    let mut buf = vec![0u8; 8];
    s.read_exact(&mut buf).unwrap();
    let len = bus::frame_len(&buf).unwrap().unwrap();
    buf.resize(len, 0);
    s.read_exact(&mut buf[8..]).unwrap();
    Message::decode(&buf).unwrap_or_else(|e| panic!("{e:?}"))
}

fn cluster(p: &ServerProcess, args: &[&str]) -> String {
    let mut c = p.client();
    let mut cmd = redis::cmd("CLUSTER");
    for a in args {
        cmd.arg(*a);
    }
    cmd.query(&mut c).unwrap()
}

#[test]
fn redis_takes_our_meet_and_pongs_and_lists_our_node() {
    let r = redis_cluster_node();
    let redis_bus = r.free_port.unwrap();
    let redis_id = cluster(&r, &["MYID"]);
    // Our bus port, which we announce and Redis will connect to.
    let ours = TcpListener::bind("127.0.0.1:0").unwrap();
    let our_bus = ours.local_addr().unwrap().port();

    let mut link = TcpStream::connect(("127.0.0.1", redis_bus)).unwrap();
    link.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (st, me) = our_node(our_bus);
    let meet = st.ping(kind::MEET, &me, |_| false, |_| 0);
    link.write_all(&meet.encode()).unwrap();
    let pong = read_message(&mut link);
    let h = &pong.header;
    assert_eq!(h.kind, kind::PONG);
    assert_eq!(std::str::from_utf8(&h.sender).unwrap(), redis_id);
    assert_eq!(h.port, r.port);
    assert_eq!(h.cport, redis_bus);
    assert_eq!(h.flags & node_flags::MASTER, node_flags::MASTER);
    assert_eq!(h.slaveof, NULL_NAME);
    assert_eq!(h.slots.count(), 0);
    match &pong.body {
        Body::Ping { exts, .. } => {
            assert!(
                exts.contains(&Ext::Hostname("redis-node.test".into())),
                "{exts:?}"
            );
        }
        other => panic!("{other:?}"),
    }

    // Redis connects to the node it added (in handshake) and PINGs it;
    // our PONGs complete the handshake.
    ours.set_nonblocking(false).unwrap();
    let (mut back, _) = ours.accept().unwrap();
    back.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let want = format!(
        "{} 127.0.0.1:{OUR_CLIENT_PORT}@{our_bus},ferrokv-node.test master",
        std::str::from_utf8(OUR_NAME).unwrap()
    );
    loop {
        let ping = read_message(&mut back);
        assert!(
            [kind::PING, kind::MEET].contains(&ping.header.kind),
            "{:?}",
            ping.header
        );
        assert_eq!(std::str::from_utf8(&ping.header.sender).unwrap(), redis_id);
        let reply = st.ping(kind::PONG, &me, |_| true, |_| 0);
        back.write_all(&reply.encode()).unwrap();
        let nodes = cluster(&r, &["NODES"]);
        if nodes.lines().any(|l| l.starts_with(&want)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Redis never listed our node as {want:?}:\n{nodes}"
        );
    }
    // Redis's own view of slots agrees with ours.
    for key in ["foo", "{user1000}.following", "somekey", ""] {
        let slot: i64 = {
            let mut c = r.client();
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query(&mut c)
                .unwrap()
        };
        assert_eq!(slot, key_slot(key.as_bytes()) as i64, "{key:?}");
    }
    // Redis's nodes.conf, read by our parser, lists our node as it should
    // and writes back byte for byte.
    // (A learnt hostname alone does not make Redis 7.0 save the file.)
    assert_eq!(cluster(&r, &["SAVECONFIG"]), "OK");
    let text = std::fs::read_to_string(r.dir.path().join("nodes.conf")).unwrap();
    let conf = NodesConf::parse(&text).unwrap();
    assert_eq!(conf.render(), text);
    assert_eq!(conf.myself().id, redis_id);
    let us = conf
        .nodes
        .iter()
        .find(|n| n.id.as_bytes() == OUR_NAME)
        .unwrap();
    assert_eq!(
        (us.port, us.cport, us.hostname.as_str()),
        (OUR_CLIENT_PORT, our_bus, "ferrokv-node.test")
    );
    assert_eq!(us.flags, node_flags::MASTER);
    // Our node stays known while it answers.
    wait_for("the node connected", 5, || {
        cluster(&r, &["NODES"])
            .lines()
            .find(|l| l.starts_with(&want) && l.contains(" connected"))
            .map(|_| ())
    });
}
