//! Unit tests and the model-based property test of the stream.

use super::*;
use proptest::prelude::*;

fn id(ms: u64, seq: u64) -> StreamId {
    StreamId::new(ms, seq)
}

fn add(s: &mut Stream, i: StreamId, pairs: &[(&str, &str)]) {
    s.append(
        i,
        pairs.iter().map(|(f, v)| (f.as_bytes(), v.as_bytes())),
        NodeLimits::default(),
    )
    .unwrap();
}

fn add_with(s: &mut Stream, i: StreamId, pairs: &[(&[u8], &[u8])], limits: NodeLimits) {
    s.append(i, pairs.iter().copied(), limits).unwrap();
}

fn ac(start: StreamId, count: u64, justid: bool, now_ms: i64) -> AutoClaimOptions {
    AutoClaimOptions {
        start,
        count,
        min_idle_ms: 0,
        justid,
        now_ms,
    }
}

fn ids(r: Range<'_>) -> Vec<StreamId> {
    r.map(|(i, _)| i).collect()
}

fn owned(p: Pairs<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    p.map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
}

fn roundtrip_nodes(s: &Stream) {
    for (k, n) in s.nodes() {
        let lp = node_to_listpack(*k, n);
        assert_eq!(lp.len(), n.lp_bytes());
        assert_eq!(&node_from_listpack(*k, &lp).unwrap(), n);
    }
}

#[test]
fn append_range_and_reverse_range() {
    let mut s = Stream::new();
    add(&mut s, id(1, 0), &[("f1", "v1"), ("f2", "v2")]);
    add(&mut s, id(1, 1), &[("f1", "a"), ("f2", "b")]);
    add(&mut s, id(5, 0), &[("other", "x")]);
    add(&mut s, id(5, 7), &[]);
    assert_eq!(s.len(), 4);
    assert_eq!(s.first_id(), id(1, 0));
    assert_eq!(s.last_id(), id(5, 7));
    assert_eq!(s.entries_added(), 4);
    assert_eq!(s.nodes().len(), 1);
    let all = ids(s.range(StreamId::MIN, StreamId::MAX, false));
    assert_eq!(all, vec![id(1, 0), id(1, 1), id(5, 0), id(5, 7)]);
    let rev = ids(s.range(StreamId::MIN, StreamId::MAX, true));
    assert_eq!(rev, vec![id(5, 7), id(5, 0), id(1, 1), id(1, 0)]);
    assert_eq!(
        ids(s.range(id(1, 1), id(5, 0), false)),
        vec![id(1, 1), id(5, 0)]
    );
    assert_eq!(
        ids(s.range(id(1, 1), id(5, 0), true)),
        vec![id(5, 0), id(1, 1)]
    );
    assert!(ids(s.range(id(5, 0), id(1, 1), false)).is_empty());
    assert!(ids(s.range(id(9, 0), StreamId::MAX, true)).is_empty());
    assert_eq!(
        owned(s.get(id(1, 1)).unwrap()),
        vec![
            (b"f1".to_vec(), b"a".to_vec()),
            (b"f2".to_vec(), b"b".to_vec())
        ]
    );
    assert_eq!(
        owned(s.get(id(5, 0)).unwrap()),
        vec![(b"other".to_vec(), b"x".to_vec())]
    );
    assert_eq!(s.get(id(5, 7)).unwrap().len(), 0);
    assert!(s.get(id(2, 0)).is_none());
    // A count of 2^63 is a `take`: nothing is sized by it.
    assert_eq!(
        s.range(StreamId::MIN, StreamId::MAX, false)
            .take(1 << 63)
            .count(),
        4
    );
    roundtrip_nodes(&s);
}

#[test]
fn append_refuses_small_ids_and_huge_entries() {
    let mut s = Stream::new();
    let l = NodeLimits::default();
    assert_eq!(
        s.append(id(0, 0), std::iter::empty(), l),
        Err(AppendError::IdNotGreater)
    );
    add(&mut s, id(3, 3), &[("a", "b")]);
    assert_eq!(
        s.append(id(3, 3), std::iter::empty(), l),
        Err(AppendError::IdNotGreater)
    );
    assert_eq!(s.len(), 1);
}

#[test]
fn next_id_follows_stream_append_item() {
    let mut s = Stream::new();
    assert_eq!(s.next_id(IdRequest::Auto, 100), Ok(id(100, 0)));
    assert_eq!(s.next_id(IdRequest::AutoSeq(0), 100), Ok(id(0, 1)));
    assert_eq!(
        s.next_id(IdRequest::Explicit(id(0, 0)), 1),
        Err(NextIdError::NotGreater)
    );
    add(&mut s, id(100, 5), &[]);
    // Clock behind the last ID: same ms, next sequence.
    assert_eq!(s.next_id(IdRequest::Auto, 50), Ok(id(100, 6)));
    assert_eq!(s.next_id(IdRequest::Auto, 101), Ok(id(101, 0)));
    assert_eq!(s.next_id(IdRequest::AutoSeq(100), 0), Ok(id(100, 6)));
    assert_eq!(
        s.next_id(IdRequest::AutoSeq(99), 0),
        Err(NextIdError::NotGreater)
    );
    assert_eq!(s.next_id(IdRequest::AutoSeq(200), 0), Ok(id(200, 0)));
    assert_eq!(
        s.next_id(IdRequest::Explicit(id(100, 5)), 0),
        Err(NextIdError::NotGreater)
    );
    s.set_id(id(7, u64::MAX), None, None);
    assert_eq!(
        s.next_id(IdRequest::AutoSeq(7), 0),
        Err(NextIdError::NotGreater)
    );
    assert_eq!(s.next_id(IdRequest::Auto, 0), Ok(id(8, 0)));
    s.set_id(StreamId::MAX, None, None);
    assert_eq!(s.next_id(IdRequest::Auto, 0), Err(NextIdError::Exhausted));
    assert_eq!(
        s.next_id(IdRequest::Explicit(StreamId::MAX), 0),
        Err(NextIdError::Exhausted)
    );
}

#[test]
fn delete_marks_drops_nodes_and_tracks_first_and_max_deleted() {
    let mut s = Stream::new();
    let l = NodeLimits {
        max_bytes: 4096,
        max_entries: 2,
    };
    for i in 1..=5 {
        add_with(&mut s, id(i, 0), &[(b"f", b"v")], l);
    }
    assert_eq!(s.nodes().len(), 3);
    assert!(s.delete(id(1, 0)));
    assert!(!s.delete(id(1, 0)));
    assert!(!s.delete(id(9, 0)));
    assert_eq!(s.first_id(), id(2, 0));
    assert_eq!(s.max_deleted_entry_id(), id(1, 0));
    // Deleting the node's last live entry removes the node.
    assert!(s.delete(id(2, 0)));
    assert_eq!(s.nodes().len(), 2);
    assert_eq!(s.first_id(), id(3, 0));
    assert!(s.delete(id(4, 0)));
    assert_eq!(s.max_deleted_entry_id(), id(4, 0));
    assert!(s.delete(id(3, 0)));
    assert_eq!(s.max_deleted_entry_id(), id(4, 0));
    assert_eq!(s.first_id(), id(5, 0));
    assert!(s.delete(id(5, 0)));
    assert_eq!(s.len(), 0);
    assert_eq!(s.first_id(), StreamId::MIN);
    assert_eq!(s.last_id(), id(5, 0));
    assert_eq!(s.entries_added(), 5);
    assert!(s.nodes().is_empty());
}

#[test]
fn deleted_entries_still_count_towards_node_max_entries() {
    // redis-server 7.0.15: stream-node-max-entries 3, XADD 1..3, XDEL 2,
    // XADD 4 -> radix-tree-keys 2.
    let mut s = Stream::new();
    let l = NodeLimits {
        max_bytes: 4096,
        max_entries: 3,
    };
    for i in 1..=3 {
        add_with(&mut s, id(i, 0), &[(b"f", b"v")], l);
    }
    s.delete(id(2, 0));
    add_with(&mut s, id(4, 0), &[(b"f", b"v")], l);
    assert_eq!(s.nodes().len(), 2);
}

/// Figures recorded from redis-server 7.0.15 (default node limits).
#[test]
fn node_counts_and_trims_match_recorded_redis_figures() {
    let l = NodeLimits::default();
    let name = vec![b'x'; 100];
    let mut a = Stream::new();
    for i in 1..=1000u64 {
        let n = (i * 1000).to_string();
        add_with(
            &mut a,
            id(i, 0),
            &[(b"name", &name), (b"n", n.as_bytes())],
            l,
        );
    }
    assert_eq!(a.nodes().len(), 29);
    let trim = |strategy| Trim {
        strategy,
        approx: true,
        limit: 10000,
    };
    assert_eq!(a.trim(trim(TrimStrategy::MaxLen(555))), 420);
    assert_eq!(a.len(), 580);
    let mut b = Stream::new();
    for i in 1..=1000u64 {
        let v = (i * i * i * 1000).to_string();
        add_with(&mut b, id(i / 3, i), &[(b"f", v.as_bytes())], l);
    }
    assert_eq!(b.nodes().len(), 10);
    assert_eq!(b.trim(trim(TrimStrategy::MinId(id(250, 0)))), 700);
    assert_eq!(b.len(), 300);
    // 1,000,000 entries of `XADD s * f1 v1 f2 v2` make 10000 nodes.
    let mut c = Stream::new();
    for i in 0..20_000u64 {
        add_with(
            &mut c,
            id(1 + i / 7, i % 7),
            &[(b"f1", b"v1"), (b"f2", b"v2")],
            l,
        );
    }
    assert_eq!(c.nodes().len(), 200);
}

#[test]
fn trims_follow_stream_trim() {
    let l = NodeLimits {
        max_bytes: 0,
        max_entries: 10,
    };
    let build = || {
        let mut s = Stream::new();
        for i in 1..=35 {
            add_with(&mut s, id(i, 0), &[(b"f", b"v")], l);
        }
        s
    };
    let t = |strategy, approx, limit| Trim {
        strategy,
        approx,
        limit,
    };
    // Approximate: whole nodes only.
    let mut s = build();
    assert_eq!(s.trim(t(TrimStrategy::MaxLen(22), true, 0)), 10);
    assert_eq!(s.len(), 25);
    assert_eq!(s.first_id(), id(11, 0));
    // Exact: whole nodes, then tombstones in the next.
    let mut s = build();
    assert_eq!(s.trim(t(TrimStrategy::MaxLen(22), false, 0)), 13);
    assert_eq!(s.len(), 22);
    assert_eq!(s.first_id(), id(14, 0));
    assert_eq!(s.nodes().len(), 3);
    // LIMIT stops before a node that would exceed it.
    let mut s = build();
    assert_eq!(s.trim(t(TrimStrategy::MaxLen(0), true, 25)), 20);
    assert_eq!(s.len(), 15);
    // MINID, exact, inside a node.
    let mut s = build();
    assert_eq!(s.trim(t(TrimStrategy::MinId(id(15, 0)), false, 0)), 14);
    assert_eq!(s.first_id(), id(15, 0));
    // MINID whose node's last entry is a tombstone at or above the ID: the
    // node stays with no live entries (as in Redis), and goes later.
    let mut s = build();
    s.delete(id(20, 0));
    s.delete(id(19, 0));
    assert_eq!(s.trim(t(TrimStrategy::MinId(id(20, 0)), false, 0)), 18);
    assert_eq!(s.nodes().len(), 3);
    assert_eq!(s.nodes()[&id(11, 0)].live(), 0);
    assert_eq!(s.first_id(), id(21, 0));
    roundtrip_nodes(&s);
    assert_eq!(s.trim(t(TrimStrategy::MaxLen(100), true, 0)), 0);
    assert_eq!(s.trim(t(TrimStrategy::MaxLen(15), true, 0)), 0);
    assert_eq!(s.nodes().len(), 3);
    // A trim that has work to do drops the empty node first.
    assert_eq!(s.trim(t(TrimStrategy::MaxLen(14), true, 0)), 0);
    assert_eq!(s.nodes().len(), 2);
    // MAXLEN 0 empties it.
    assert_eq!(s.trim(t(TrimStrategy::MaxLen(0), false, 0)), 15);
    assert!(s.is_empty());
    assert_eq!(s.first_id(), StreamId::MIN);
}

#[test]
fn listpack_reader_rejects_corruption_without_panicking() {
    let mut s = Stream::new();
    let l = NodeLimits::default();
    add_with(&mut s, id(1, 0), &[(b"f1", b"v1"), (b"f2", b"123")], l);
    add_with(
        &mut s,
        id(1, 5),
        &[(b"f1", b"x"), (b"f2", &[b'y'; 70][..])],
        l,
    );
    add_with(&mut s, id(3, 2), &[(b"g", b"-7")], l);
    s.delete(id(1, 5));
    let (k, n) = s.nodes().iter().next().unwrap();
    let lp = node_to_listpack(*k, n);
    assert!(node_from_listpack(*k, &lp).is_ok());
    // Every truncation and every single-byte change is an Err or a node
    // that re-encodes to the same bytes.
    for cut in 0..lp.len() {
        assert!(node_from_listpack(*k, &lp[..cut]).is_err());
    }
    for i in 0..lp.len() {
        for b in [
            0u8, 1, 2, 3, 0x7f, 0x80, 0xbf, 0xc0, 0xe0, 0xf0, 0xf1, 0xf4, 0xff,
        ] {
            let mut bad = lp.clone();
            bad[i] = b;
            if let Ok(node) = node_from_listpack(*k, &bad) {
                assert_eq!(node_to_listpack(*k, &node).len(), node.lp_bytes());
            }
        }
    }
    // A field count of a billion does not allocate a billion.
    let mut huge = vec![0u8; 6];
    huge.extend_from_slice(&[1, 1, 0, 1]); // count 1, deleted 0
    huge.extend_from_slice(&[0xF3, 0, 0xCA, 0x9A, 0x3B, 5]); // 1e9 fields
    huge.push(0xFF);
    let len = huge.len() as u32;
    huge[0..4].copy_from_slice(&len.to_le_bytes());
    assert!(node_from_listpack(id(1, 0), &huge).is_err());
    assert!(node_from_listpack(id(1, 0), &[]).is_err());
}

#[test]
fn consumer_group_delivery_pel_and_lag() {
    let mut s = Stream::new();
    for i in 1..=5 {
        add(&mut s, id(i, 0), &[("f", "v")]);
    }
    assert!(s.create_group(b"g", StreamId::MIN, 0));
    assert!(!s.create_group(b"g", StreamId::MIN, 0));
    assert_eq!(s.group_lag(b"g"), Some(5));
    assert!(s.group_mut(b"g").unwrap().touch_consumer(b"alice", 10));
    let d = s.deliver_new(b"g", b"alice", 2, false, 100).unwrap();
    assert_eq!((d.first(), d.last(), d.count()), (id(1, 0), id(2, 0), 2));
    let g = s.group(b"g").unwrap();
    assert_eq!(g.last_id, id(2, 0));
    assert_eq!(g.entries_read, 2);
    assert_eq!(s.group_lag(b"g"), Some(3));
    assert_eq!(g.pel().len(), 2);
    assert_eq!(g.consumer(b"alice").unwrap().pending().len(), 2);
    // Bob gets the rest; NOACK leaves no NACKs.
    let d = s.deliver_new(b"g", b"bob", 0, true, 200).unwrap();
    assert_eq!(d.count(), 3);
    assert_eq!(s.group(b"g").unwrap().pel().len(), 2);
    assert_eq!(s.group_lag(b"g"), Some(0));
    assert_eq!(
        s.deliver_new(b"g", b"bob", 0, false, 200).unwrap().count(),
        0
    );
    // History read: delivery count goes up for live entries only.
    s.delete(id(2, 0));
    let h = s
        .deliver_pending(b"g", b"alice", StreamId::MIN, 0, 300)
        .unwrap();
    assert_eq!(h, vec![(id(1, 0), true), (id(2, 0), false)]);
    let g = s.group(b"g").unwrap();
    assert_eq!(g.pel()[&id(1, 0)].delivery_count, 2);
    assert_eq!(g.pel()[&id(1, 0)].delivery_time, 300);
    assert_eq!(g.pel()[&id(2, 0)].delivery_count, 1);
    let sum = g.pending_summary();
    assert_eq!(sum.count, 2);
    assert_eq!(sum.bounds, Some((id(1, 0), id(2, 0))));
    // XAUTOCLAIM: 2-0's entry is gone and leaves the PEL.
    let c = s
        .autoclaim(b"g", b"carol", ac(StreamId::MIN, 10, false, 400))
        .unwrap();
    assert_eq!(c.claimed, vec![id(1, 0)]);
    assert_eq!(c.deleted, vec![id(2, 0)]);
    assert_eq!(c.next, StreamId::MIN);
    assert!(c.consumer_created);
    let g = s.group(b"g").unwrap();
    assert_eq!(g.pel()[&id(1, 0)].consumer.as_ref(), b"carol");
    assert_eq!(g.pel()[&id(1, 0)].delivery_count, 3);
    assert!(g.consumer(b"alice").unwrap().pending().is_empty());
    // XCLAIM with min-idle: too young, then old enough; FORCE creates.
    let opts = ClaimOptions {
        min_idle_ms: 1000,
        delivery_time_ms: 500,
        retry_count: None,
        force: false,
        justid: false,
        now_ms: 500,
    };
    let c = s.claim(b"g", b"dave", &[id(1, 0)], opts).unwrap();
    assert!(c.claimed.is_empty() && !c.consumer_created);
    let c = s
        .claim(
            b"g",
            b"dave",
            &[id(1, 0), id(2, 0), id(3, 0)],
            ClaimOptions {
                now_ms: 1400,
                ..opts
            },
        )
        .unwrap();
    assert_eq!(c.claimed, vec![id(1, 0)]);
    let c = s
        .claim(
            b"g",
            b"dave",
            &[id(3, 0)],
            ClaimOptions {
                force: true,
                ..opts
            },
        )
        .unwrap();
    assert_eq!(c.claimed, vec![id(3, 0)]);
    let g = s.group(b"g").unwrap();
    assert_eq!(g.pel()[&id(3, 0)].delivery_count, 2);
    assert_eq!(g.consumer(b"dave").unwrap().pending().len(), 2);
    // XPENDING ranges, whole group and one consumer.
    let p: Vec<_> = g
        .pending_range(StreamId::MIN, StreamId::MAX, None)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(p, vec![id(1, 0), id(3, 0)]);
    assert_eq!(
        g.pending_range(StreamId::MIN, StreamId::MAX, Some(b"carol"))
            .count(),
        0
    );
    assert_eq!(
        g.pending_range(id(2, 0), StreamId::MAX, Some(b"dave"))
            .count(),
        1
    );
    // XACK, DELCONSUMER, DESTROY.
    let g = s.group_mut(b"g").unwrap();
    assert!(g.ack(id(1, 0)));
    assert!(!g.ack(id(1, 0)));
    assert_eq!(g.delete_consumer(b"dave"), Some(1));
    assert_eq!(g.delete_consumer(b"dave"), None);
    assert!(g.pel().is_empty());
    assert!(s.destroy_group(b"g"));
    assert!(!s.destroy_group(b"g"));
}

#[test]
fn lag_with_tombstones_and_estimates() {
    // Mirrors redis-server 7.0.15: 1..3 added, 3-0 deleted, 4-0 added;
    // a group at $ reads nil entries-read and lag 0, one at 0 lag nil.
    let mut s = Stream::new();
    for i in 1..=3 {
        add(&mut s, id(i, 0), &[("f", "v")]);
    }
    s.delete(id(3, 0));
    add(&mut s, id(4, 0), &[("f", "v")]);
    s.create_group(b"g", s.last_id(), ENTRIES_READ_INVALID);
    s.create_group(b"g2", StreamId::MIN, ENTRIES_READ_INVALID);
    assert_eq!(s.group_lag(b"g"), Some(0));
    assert_eq!(s.group_lag(b"g2"), None);
    // Reading past the tombstone makes the counter exact again.
    s.deliver_new(b"g2", b"c", 0, true, 0);
    assert_eq!(s.group(b"g2").unwrap().entries_read, 4);
    assert_eq!(s.group_lag(b"g2"), Some(0));
    let empty = Stream::new();
    assert_eq!(empty.meta().estimate_distance(id(5, 0)), 0);
}

#[test]
fn restore_checks_groups_and_meta() {
    let mut s = Stream::new();
    add(&mut s, id(1, 0), &[("f", "v")]);
    add(&mut s, id(2, 0), &[("f", "w")]);
    let mut r = Stream::new();
    for (k, n) in s.nodes() {
        r.restore_node(*k, &node_to_listpack(*k, n)).unwrap();
    }
    assert!(r
        .restore_node(id(1, 0), &node_to_listpack(id(1, 0), &s.nodes()[&id(1, 0)]))
        .is_err());
    let mut bad = s.meta();
    bad.length = 7;
    assert!(r.restore_meta(bad).is_err());
    r.restore_meta(s.meta()).unwrap();
    assert_eq!(r, s);
    let mut g = ConsumerGroup::new(id(2, 0), 2);
    g.restore_pending(id(1, 0), 5, 3).unwrap();
    assert_eq!(
        g.restore_pending(id(1, 0), 5, 3),
        Err(group::RestoreError::DuplicatePending)
    );
    g.restore_pending(id(2, 0), 6, 1).unwrap();
    assert_eq!(g.restore_finish(), Err(group::RestoreError::UnownedPending));
    g.restore_consumer(b"a", 9, [id(1, 0)]).unwrap();
    assert_eq!(
        g.restore_consumer(b"b", 9, [id(1, 0)]),
        Err(group::RestoreError::BadConsumerPending)
    );
    g.restore_consumer(b"c", 9, [id(2, 0)]).unwrap();
    g.restore_finish().unwrap();
    assert_eq!(g.pel()[&id(2, 0)].consumer.as_ref(), b"c");
}

/// Bytes per entry for 1,000,000 × `XADD s * f1 v1 f2 v2` (the figure in
/// the module doc). IDs as a fast client gets them: a few entries per ms.
#[test]
fn stream_memory() {
    let mut s = Stream::new();
    let l = NodeLimits::default();
    let base = 1_700_000_000_000u64;
    for i in 0..1_000_000u64 {
        let next = s.next_id(IdRequest::Auto, base + i / 5).unwrap();
        s.append(
            next,
            [(&b"f1"[..], &b"v1"[..]), (b"f2", b"v2")].into_iter(),
            l,
        )
        .unwrap();
    }
    assert_eq!(s.nodes().len(), 10_000);
    let bytes = s.heap_bytes();
    let lp: usize = s.nodes().values().map(Node::lp_bytes).sum();
    eprintln!(
        "1M entries: {bytes} bytes held ({:.2} per entry); Redis listpacks alone: {lp} ({:.2} per entry)",
        bytes as f64 / 1e6,
        lp as f64 / 1e6
    );
    // redis-server 7.0.15 grows used_memory by 18.4 bytes per entry here.
    assert!(bytes < 16_500_000, "{bytes}");
}

// ---------------------------------------------------------------------
// Property test against a model
// ---------------------------------------------------------------------

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

#[derive(Default)]
struct Model {
    entries: BTreeMap<StreamId, Fields>,
    last_id: StreamId,
    max_deleted: StreamId,
    added: u64,
    /// Group "g": last_id and PEL id -> (consumer, delivery_count).
    g_last: StreamId,
    pel: BTreeMap<StreamId, (Vec<u8>, u64)>,
}

#[derive(Debug, Clone)]
enum Op {
    Add {
        ms_step: u64,
        seq_step: u64,
        fields: u8,
        vals: Vec<Vec<u8>>,
    },
    Del(usize),
    Trim {
        maxlen: Option<u64>,
        minid_pick: usize,
        approx: bool,
        limit: u64,
    },
    Range {
        a: usize,
        b: usize,
        rev: bool,
        count: usize,
    },
    Deliver {
        consumer: u8,
        count: usize,
        noack: bool,
    },
    Ack(usize),
    Claim {
        consumer: u8,
        pick: usize,
    },
    AutoClaim {
        consumer: u8,
        count: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let val = prop_oneof![
        Just(b"v".to_vec()),
        (0i64..100000).prop_map(|n| (n - 500).to_string().into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..80),
    ];
    prop_oneof![
        6 => (0u64..3, 0u64..4, 0u8..4, proptest::collection::vec(val, 3)).prop_map(|(ms_step, seq_step, fields, vals)| Op::Add { ms_step, seq_step, fields, vals }),
        2 => any::<usize>().prop_map(Op::Del),
        1 => (proptest::option::of(0u64..40), any::<usize>(), any::<bool>(), 0u64..30).prop_map(|(maxlen, minid_pick, approx, limit)| Op::Trim { maxlen, minid_pick, approx, limit }),
        1 => (any::<usize>(), any::<usize>(), any::<bool>(), 0usize..10).prop_map(|(a, b, rev, count)| Op::Range { a, b, rev, count }),
        1 => (0u8..3, 0usize..5, any::<bool>()).prop_map(|(consumer, count, noack)| Op::Deliver { consumer, count, noack }),
        1 => any::<usize>().prop_map(Op::Ack),
        1 => (0u8..3, any::<usize>()).prop_map(|(consumer, pick)| Op::Claim { consumer, pick }),
        1 => (0u8..3, 1u64..5).prop_map(|(consumer, count)| Op::AutoClaim { consumer, count }),
    ]
}

const FIELD_NAMES: [&[&[u8]]; 4] = [
    &[b"f1", b"f2"],
    &[b"f1", b"f2"],
    &[b"x"],
    &[b"1", b"f2", b"-3"],
];

fn check(s: &Stream, m: &Model) {
    let got: Vec<(StreamId, Fields)> = s
        .range(StreamId::MIN, StreamId::MAX, false)
        .map(|(i, p)| (i, owned(p)))
        .collect();
    let want: Vec<(StreamId, Fields)> = m.entries.iter().map(|(k, v)| (*k, v.clone())).collect();
    assert_eq!(got, want);
    assert_eq!(s.len(), m.entries.len() as u64);
    assert_eq!(
        s.first_id(),
        m.entries.keys().next().copied().unwrap_or_default()
    );
    assert_eq!(s.last_id(), m.last_id);
    assert_eq!(s.last_live_id(), m.entries.keys().next_back().copied());
    assert_eq!(s.max_deleted_entry_id(), m.max_deleted);
    assert_eq!(s.entries_added(), m.added);
    let live: u64 = s.nodes().values().map(Node::live).sum();
    assert_eq!(live, s.len());
    roundtrip_nodes(s);
    let g = s.group(b"g").unwrap();
    assert_eq!(g.last_id, m.g_last);
    let pel: BTreeMap<StreamId, (Vec<u8>, u64)> = g
        .pel()
        .iter()
        .map(|(k, n)| (*k, (n.consumer.to_vec(), n.delivery_count)))
        .collect();
    assert_eq!(pel, m.pel);
    for (name, c) in g.consumers() {
        let mine: Vec<StreamId> = m
            .pel
            .iter()
            .filter(|(_, (o, _))| o == name)
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(c.pending().iter().copied().collect::<Vec<_>>(), mine);
    }
}

fn pick(keys: &[StreamId], i: usize, last: StreamId) -> StreamId {
    if keys.is_empty() {
        last
    } else {
        keys[i % keys.len()]
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn stream_matches_model(ops in proptest::collection::vec(op(), 1..120), tiny in any::<bool>()) {
        let limits = if tiny {
            NodeLimits { max_bytes: 120, max_entries: 4 }
        } else {
            NodeLimits::default()
        };
        let mut s = Stream::new();
        let mut m = Model::default();
        s.create_group(b"g", StreamId::MIN, 0);
        for op in ops {
            let keys: Vec<StreamId> = m.entries.keys().copied().collect();
            match op {
                Op::Add { ms_step, seq_step, fields, vals } => {
                    let last = m.last_id;
                    let next = if ms_step == 0 {
                        StreamId::new(last.ms, last.seq + 1 + seq_step)
                    } else {
                        StreamId::new(last.ms + ms_step, seq_step)
                    };
                    let names = FIELD_NAMES[fields as usize];
                    let f: Fields = names.iter().zip(vals).map(|(n, v)| (n.to_vec(), v)).collect();
                    s.append(next, f.iter().map(|(a, b)| (&a[..], &b[..])), limits).unwrap();
                    m.entries.insert(next, f);
                    m.last_id = next;
                    m.added += 1;
                }
                Op::Del(i) => {
                    let target = pick(&keys, i, StreamId::new(1, 1));
                    let was = m.entries.remove(&target).is_some();
                    if was && target > m.max_deleted {
                        m.max_deleted = target;
                    }
                    prop_assert_eq!(s.delete(target), was);
                }
                Op::Trim { maxlen, minid_pick, approx, limit } => {
                    let limit = if approx { limit } else { 0 };
                    let strategy = match maxlen {
                        Some(n) => TrimStrategy::MaxLen(n),
                        None => TrimStrategy::MinId(pick(&keys, minid_pick, StreamId::MIN)),
                    };
                    let removed = s.trim(Trim { strategy, approx, limit });
                    let must = match strategy {
                        TrimStrategy::MaxLen(n) => (keys.len() as u64).saturating_sub(n),
                        TrimStrategy::MinId(id) => keys.iter().filter(|k| **k < id).count() as u64,
                    };
                    if approx {
                        prop_assert!(removed <= must);
                        if limit != 0 {
                            prop_assert!(removed <= limit);
                        }
                    } else {
                        prop_assert_eq!(removed, must);
                    }
                    for k in keys.iter().take(removed as usize) {
                        m.entries.remove(k);
                    }
                }
                Op::Range { a, b, rev, count } => {
                    let (lo, hi) = (pick(&keys, a, StreamId::MIN), pick(&keys, b, StreamId::MAX));
                    let got = ids(s.range(lo, hi, rev)).into_iter().take(count).collect::<Vec<_>>();
                    let mut want: Vec<StreamId> = if lo <= hi {
                        m.entries.range(lo..=hi).map(|(k, _)| *k).collect()
                    } else {
                        Vec::new()
                    };
                    if rev {
                        want.reverse();
                    }
                    want.truncate(count);
                    prop_assert_eq!(got, want);
                }
                Op::Deliver { consumer, count, noack } => {
                    let name = vec![b'a' + consumer];
                    let d = s.deliver_new(b"g", &name, count, noack, 7).unwrap();
                    let todo: Vec<StreamId> = m
                        .entries
                        .range(m.g_last.incr().unwrap()..)
                        .map(|(k, _)| *k)
                        .take(if count == 0 { usize::MAX } else { count })
                        .collect();
                    prop_assert_eq!(d.count(), todo.len());
                    prop_assert_eq!(&d.ids, &todo);
                    if let Some(l) = todo.last() {
                        m.g_last = *l;
                        prop_assert_eq!(d.first(), todo[0]);
                        prop_assert_eq!(d.last(), *l);
                    }
                    if !noack {
                        for id in todo {
                            m.pel.insert(id, (name.clone(), 1));
                        }
                    }
                }
                Op::Ack(i) => {
                    let pk: Vec<StreamId> = m.pel.keys().copied().collect();
                    let target = pick(&pk, i, StreamId::new(1, 1));
                    let was = m.pel.remove(&target).is_some();
                    prop_assert_eq!(s.group_mut(b"g").unwrap().ack(target), was);
                }
                Op::Claim { consumer, pick: i } => {
                    let name = vec![b'a' + consumer];
                    let pk: Vec<StreamId> = m.pel.keys().copied().collect();
                    let target = pick(&pk, i, StreamId::new(1, 1));
                    let opts = ClaimOptions { min_idle_ms: 0, delivery_time_ms: 9, retry_count: None, force: false, justid: false, now_ms: 9 };
                    let c = s.claim(b"g", &name, &[target], opts).unwrap();
                    if let Some(e) = m.pel.get_mut(&target) {
                        if m.entries.contains_key(&target) {
                            e.0 = name.clone();
                            e.1 += 1;
                            prop_assert_eq!(c.claimed, vec![target]);
                        } else {
                            m.pel.remove(&target);
                            prop_assert_eq!(c.deleted, vec![target]);
                        }
                    } else {
                        prop_assert!(c.claimed.is_empty() && c.deleted.is_empty());
                    }
                }
                Op::AutoClaim { consumer, count } => {
                    let name = vec![b'a' + consumer];
                    let c = s.autoclaim(b"g", &name, ac(StreamId::MIN, count, true, 11)).unwrap();
                    let pk: Vec<StreamId> = m.pel.keys().copied().collect();
                    let visited = &pk[..pk.len().min(count as usize)];
                    let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
                    for id in visited {
                        if m.entries.contains_key(id) {
                            m.pel.get_mut(id).unwrap().0 = name.clone();
                            claimed.push(*id);
                        } else {
                            m.pel.remove(id);
                            deleted.push(*id);
                        }
                    }
                    prop_assert_eq!(c.claimed, claimed);
                    prop_assert_eq!(c.deleted, deleted);
                    let next = pk.get(count as usize).copied().unwrap_or(StreamId::MIN);
                    prop_assert_eq!(c.next, next);
                }
            }
            check(&s, &m);
        }
    }
}
