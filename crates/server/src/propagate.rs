//! The propagation stream: the one place every change to the data set is
//! written out, in a deterministic form, for the AOF (and, with
//! replication, the replicas) — Redis's `propagateNow`.
//!
//! A write command is propagated after it ran, when it changed something
//! (the `dirty` counter moved), as the client sent it unless the handler
//! gave a rewritten form: relative expiries become absolute (`SET .. PXAT`,
//! `PEXPIREAT`), `INCRBYFLOAT` becomes the `SET` of its result, and so on, so
//! that replaying the stream later, or elsewhere, gives the same data.
//! Keys removed because they expired are propagated as `DEL`, before the
//! command that noticed them.

use ferrokv_resp::encode;

/// What the current command asked to propagate, and the stream's state.
#[derive(Default)]
pub struct Propagation {
    /// The command's rewritten form, if its handler set one.
    pub rewrite: Option<Vec<Vec<u8>>>,
    /// Commands to propagate before the current one (expired-key DELs,
    /// expired hash fields' HDELs).
    pub also: Vec<(usize, Vec<Vec<u8>>)>,
    /// Commands to propagate after the current one (the field TTL that
    /// `HINCRBYFLOAT`'s `HSET` would otherwise drop).
    pub after: Vec<(usize, Vec<Vec<u8>>)>,
    /// The current command is not propagated itself, whatever it changed
    /// (Redis's `preventCommandPropagation`: an `HEXPIRE` whose fields
    /// were all deleted goes out as its `HDEL`s only).
    pub suppress: bool,
    /// The database the stream last selected.
    pub stream_db: Option<usize>,
    /// While EXEC runs its queue: what the queued commands propagate,
    /// held to be written as one MULTI ... EXEC block.
    pub exec_ops: Option<Vec<(usize, Vec<Vec<u8>>)>>,
    /// Set when EXEC has propagated its queue (true if anything was
    /// written): EXEC itself is then not propagated.
    pub exec_done: Option<bool>,
    /// The current command is propagated even if it changed nothing, or
    /// its changes were saved (Redis's `forceCommandPropagation`: a
    /// FLUSHALL of empty databases, or one whose save reset the counter).
    pub force: bool,
}

impl crate::server::Server {
    /// EXEC starts running its queue: propagation is held.
    pub fn begin_exec_propagation(&mut self) {
        self.propagation.exec_ops = Some(Vec::new());
    }

    /// EXEC ran its queue: what the commands propagated goes out wrapped in
    /// MULTI/EXEC when there is more than one (Redis 7.0's
    /// `propagatePendingCommands`: one command is atomic by itself, and a
    /// read-only transaction propagates nothing).
    pub fn end_exec_propagation(&mut self) {
        let ops = self.propagation.exec_ops.take().unwrap_or_default();
        self.propagation.exec_done = Some(!ops.is_empty());
        let wrap = ops.len() > 1;
        let (first_db, last_db) = match (ops.first(), ops.last()) {
            (Some(f), Some(l)) => (f.0, l.0),
            _ => return,
        };
        if wrap {
            self.propagate(first_db, &[b"MULTI"]);
        }
        for (db, argv) in &ops {
            self.propagate(*db, argv);
        }
        if wrap {
            self.propagate(last_db, &[b"EXEC"]);
        }
    }
}

/// Appends `argv` as a RESP multibulk, preceded by `SELECT` when the
/// stream's selected database differs.
pub fn encode_command<T: AsRef<[u8]>>(
    out: &mut Vec<u8>,
    stream_db: &mut Option<usize>,
    db: usize,
    argv: &[T],
) {
    if *stream_db != Some(db) {
        let n = db.to_string();
        encode::array(out, 2);
        encode::bulk(out, b"SELECT");
        encode::bulk(out, n.as_bytes());
        *stream_db = Some(db);
    }
    encode::array(out, argv.len());
    for a in argv {
        encode::bulk(out, a.as_ref());
    }
}
