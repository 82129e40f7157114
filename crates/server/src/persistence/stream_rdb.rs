//! A stream value to and from the RDB crate's [`StreamPayload`] (files,
//! DUMP/RESTORE, full syncs). The nodes cross as the listpacks Redis itself
//! would hold (`ferrokv_store::stream::listpack`), so the bytes written are
//! Redis's and a Redis-written stream loads with its node boundaries.
//!
//! Loading is strict: a listpack that does not validate, a length, last ID
//! or first ID the entries contradict, a repeated group or consumer, a
//! consumer owning an ID the group's PEL lacks, or a PEL entry nobody owns
//! is an error naming what is wrong, and nothing is installed.

use ferrokv_rdb::{StreamConsumer, StreamGroup, StreamPayload};
use ferrokv_store::stream::{ConsumerGroup, Stream, StreamId, StreamMeta};
use std::borrow::Cow;

fn raw(id: StreamId) -> (u64, u64) {
    (id.ms, id.seq)
}

fn id((ms, seq): (u64, u64)) -> StreamId {
    StreamId { ms, seq }
}

/// The payload an RDB file or DUMP holds for `s`.
pub fn to_payload(s: &Stream) -> StreamPayload<'static> {
    let meta = s.meta();
    StreamPayload {
        nodes: s
            .nodes()
            .iter()
            .map(|(master, node)| {
                (
                    raw(*master),
                    Cow::Owned(ferrokv_store::stream::node_to_listpack(*master, node)),
                )
            })
            .collect(),
        length: meta.length,
        last_id: raw(meta.last_id),
        first_id: Some(raw(meta.first_id)),
        max_deleted_entry_id: Some(raw(meta.max_deleted_entry_id)),
        entries_added: Some(meta.entries_added),
        groups: s
            .groups()
            .map(|(name, g)| StreamGroup {
                name: Cow::Owned(name.to_vec()),
                last_id: raw(g.last_id),
                entries_read: Some(g.entries_read),
                pel: g
                    .pel()
                    .iter()
                    .map(|(i, n)| (raw(*i), n.delivery_time as u64, n.delivery_count))
                    .collect(),
                consumers: g
                    .consumers()
                    .map(|(cname, c)| StreamConsumer {
                        name: Cow::Owned(cname.to_vec()),
                        seen_time: c.seen_time as u64,
                        active_time: None,
                        pel: c.pending().iter().map(|i| raw(*i)).collect(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The stream a payload describes, validated. A type-15 payload (no
/// first ID, tombstone, `entries_added` or `entries_read`) gets them as
/// Redis 7.0 derives them on load.
pub fn from_payload(p: &StreamPayload<'_>) -> Result<Stream, String> {
    let mut s = Stream::new();
    for (master, lp) in &p.nodes {
        s.restore_node(id(*master), lp)
            .map_err(|e| format!("stream node {}-{}: {e}", master.0, master.1))?;
    }
    let meta = StreamMeta {
        length: p.length,
        last_id: id(p.last_id),
        first_id: id(p.first_id.unwrap_or((0, 0))),
        max_deleted_entry_id: id(p.max_deleted_entry_id.unwrap_or((0, 0))),
        entries_added: p.entries_added.unwrap_or(p.length),
    };
    s.restore_meta(meta).map_err(|e| format!("stream: {e}"))?;
    for g in &p.groups {
        let last_id = id(g.last_id);
        let entries_read = g
            .entries_read
            .unwrap_or_else(|| s.meta().estimate_distance(last_id));
        let mut group = ConsumerGroup::new(last_id, entries_read);
        let bad = |e: ferrokv_store::stream::group::RestoreError| {
            format!("stream group {}: {e:?}", g.name.escape_ascii())
        };
        for &(pid, time, count) in &g.pel {
            group
                .restore_pending(id(pid), time as i64, count)
                .map_err(bad)?;
        }
        for c in &g.consumers {
            group
                .restore_consumer(&c.name, c.seen_time as i64, c.pel.iter().map(|&i| id(i)))
                .map_err(bad)?;
        }
        group.restore_finish().map_err(bad)?;
        if !s.insert_group(&g.name, group) {
            return Err(format!(
                "stream: duplicated consumer group name {}",
                g.name.escape_ascii()
            ));
        }
    }
    Ok(s)
}
