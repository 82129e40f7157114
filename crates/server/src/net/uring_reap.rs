//! The io_uring backend's completions handed to the server's clients
//! (the backend itself is `ferrokv_net::uring`: docs/io-uring.md).

use ferrokv_net::uring::{split, SendDone, KIND_RECV};

impl crate::server::Server {
    /// Hands the completions the last wait collected to their
    /// connections: received bytes queue on the connection (and its slot
    /// goes on the ready list), a finished send puts the client back on the
    /// write list, whatever names a closed connection is let go.
    pub fn uring_reap(&mut self) {
        let Some(u) = self.uring.as_mut() else {
            return;
        };
        let cqes = u.take_completions();
        for &(ud, res, flags) in &cqes {
            let Some(u) = self.uring.as_mut() else {
                break;
            };
            if u.handle_own(ud, flags) {
                continue;
            }
            let (kind, token, gen) = split(ud);
            // Its connection, unless it closed (the slot empty, or another
            // connection's now).
            let live = match self.clients.get_mut(token) {
                Some(Some(c)) => match c.conn.stream.as_mut() {
                    Some(crate::net::conn::Conn::Uring(conn, _)) if conn.generation() == gen => {
                        Some((c.id, &mut c.pending_write, conn))
                    }
                    _ => None,
                },
                _ => None,
            };
            let Some((id, pending_write, conn)) = live else {
                if kind == KIND_RECV {
                    u.orphan_recv(flags);
                }
                continue;
            };
            if kind == KIND_RECV {
                conn.on_recv(res, flags);
                u.ready.push(token);
                continue;
            }
            let (written, queue) = match conn.on_send(res) {
                SendDone::Done(n) => (n, true),
                SendDone::Partial(n) => (n, false),
                // Its next flush reports the error and the client closes.
                SendDone::Failed => (0, true),
            };
            if queue && !*pending_write {
                *pending_write = true;
                self.pending_writes.push(token);
            }
            if self.repl.is_replica_client(id) {
                self.stats.net_repl_output_bytes += written as u64;
            } else {
                self.stats.net_output_bytes += written as u64;
            }
        }
        if let Some(u) = self.uring.as_mut() {
            u.give_completions(cqes);
        }
    }
}
