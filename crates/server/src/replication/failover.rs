//! `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]`: a coordinated
//! switch of roles with one of our replicas, as Redis 7.0's
//! `failoverCommand` / `updateFailoverStatus` / `abortFailover`.
//!
//! 1. `FAILOVER` checks its arguments and our state, then pauses writes
//!    (the failover's own pause purpose, `crate::pause`) and enters
//!    `waiting-for-sync`.
//! 2. Every loop turn ([`Server::update_failover_status`]) looks for the
//!    target (the one named, or any replica) whose acknowledged offset
//!    equals ours (replicas acknowledge once a second). Past the TIMEOUT
//!    the failover goes on anyway with FORCE, or is aborted.
//! 3. `failover-in-progress`: we become a replica of the target, and our
//!    `PSYNC <replid> <offset+1>` carries a third argument, `FAILOVER`; a
//!    replica that receives it with its own replid promotes itself
//!    before answering (`+CONTINUE <new replid>`), see
//!    [`Server::psync_failover_request`].
//! 4. Once the target accepted the PSYNC (partial or full) the failover is
//!    over and the pause lifted; held writes then meet a read-only
//!    replica. If the target refused, or could not be reached, we are a
//!    master again (`abortFailover`).

use crate::pause::{PauseKind, PausePurpose};
use crate::server::Server;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FailoverState {
    #[default]
    NoFailover,
    WaitForSync,
    InProgress,
}

impl FailoverState {
    /// The name `INFO replication`'s `master_failover_state` shows.
    pub fn name(self) -> &'static str {
        match self {
            FailoverState::NoFailover => "no-failover",
            FailoverState::WaitForSync => "waiting-for-sync",
            FailoverState::InProgress => "failover-in-progress",
        }
    }
}

#[derive(Default)]
pub struct Failover {
    pub state: FailoverState,
    /// The replica we fail over to, once known.
    pub target: Option<(String, u16)>,
    /// The end of the TIMEOUT, if one was given.
    pub end: Option<Instant>,
    pub force: bool,
}

impl Failover {
    pub fn in_progress(&self) -> bool {
        self.state == FailoverState::InProgress
    }
}

/// What `FAILOVER` asked for.
struct Request {
    timeout_ms: i64,
    force: bool,
    to: Option<(String, i64)>,
}

fn parse_long(a: &[u8]) -> Result<i64, &'static str> {
    ferrokv_resp::parse_i64(a).ok_or(crate::commands::err::NOT_INTEGER)
}

/// Redis's parse loop: each option once, in any order.
fn parse(args: &ferrokv_resp::Args) -> Result<Request, &'static str> {
    use crate::commands::is;
    let mut r = Request {
        timeout_ms: 0,
        force: false,
        to: None,
    };
    let n = args.len();
    let mut j = 1;
    while j < n {
        let a = args.get(j);
        if is(a, "timeout") && j + 1 < n && r.timeout_ms == 0 {
            r.timeout_ms = parse_long(args.get(j + 1))?;
            if r.timeout_ms <= 0 {
                return Err("ERR FAILOVER timeout must be greater than 0");
            }
            j += 1;
        } else if is(a, "to") && j + 2 < n && r.to.is_none() {
            let port = parse_long(args.get(j + 2))?;
            r.to = Some((String::from_utf8_lossy(args.get(j + 1)).into_owned(), port));
            j += 2;
        } else if is(a, "force") && !r.force {
            r.force = true;
        } else {
            return Err(crate::commands::err::SYNTAX);
        }
        j += 1;
    }
    Ok(r)
}

/// FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT milliseconds]
pub fn failover_command(ctx: &mut crate::commands::Ctx, args: ferrokv_resp::Args) {
    if args.len() == 2 && crate::commands::is(args.get(1), "abort") {
        if ctx.srv.repl.failover.state == FailoverState::NoFailover {
            return ctx.error("ERR No failover in progress.");
        }
        ctx.srv.abort_failover("Failover manually aborted");
        return ctx.out().ok();
    }
    let req = match parse(&args) {
        Ok(r) => r,
        Err(e) => return ctx.error(e),
    };
    let srv = &mut *ctx.srv;
    if srv.repl.failover.state != FailoverState::NoFailover {
        return ctx.error("ERR FAILOVER already in progress.");
    }
    if srv.repl.is_replica() {
        return ctx.error("ERR FAILOVER is not valid when server is a replica.");
    }
    if srv.repl.master.replicas.is_empty() {
        return ctx.error("ERR FAILOVER requires connected replicas.");
    }
    if req.force && (req.timeout_ms == 0 || req.to.is_none()) {
        return ctx.error(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let mut target = None;
    if let Some((host, port)) = &req.to {
        let Some(r) = srv
            .repl
            .master
            .replicas
            .iter()
            .find(|r| r.ip == *host && r.listening_port as i64 == *port)
        else {
            return ctx.error("ERR FAILOVER target HOST and PORT is not a replica.");
        };
        if !r.is_online() {
            return ctx.error("ERR FAILOVER target replica is not online.");
        }
        tracing::info!("FAILOVER requested to {host}:{port}.");
        target = Some((host.clone(), r.listening_port));
    } else {
        tracing::info!("FAILOVER requested to any replica.");
    }
    let f = &mut srv.repl.failover;
    f.target = target;
    f.end =
        (req.timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(req.timeout_ms as u64));
    f.force = req.force;
    f.state = FailoverState::WaitForSync;
    srv.pause_clients(PausePurpose::Failover, i64::MAX, PauseKind::Write);
    ctx.out().ok();
}

impl Server {
    /// Redis's `updateFailoverStatus`: while waiting for the target to
    /// catch up, starts the switch once it has (or the timeout forces it).
    pub fn update_failover_status(&mut self) {
        let f = &self.repl.failover;
        if f.state != FailoverState::WaitForSync {
            return;
        }
        if f.end.is_some_and(|e| e <= Instant::now()) {
            if f.force {
                if let Some((host, port)) = f.target.clone() {
                    tracing::info!("FAILOVER to {host}:{port} time out exceeded, failing over.");
                    self.start_failover_switch(host, port);
                    return;
                }
            }
            self.abort_failover("Replica never caught up before timeout");
            return;
        }
        let offset = self.repl.master_repl_offset;
        let replicas = &self.repl.master.replicas;
        let caught_up = match &f.target {
            Some((host, port)) => replicas
                .iter()
                .find(|r| r.ip == *host && r.listening_port == *port)
                .filter(|r| r.ack_offset == offset)
                .map(|_| (host.clone(), *port)),
            None => replicas
                .iter()
                .find(|r| r.is_online() && r.ack_offset == offset)
                .map(|r| (r.ip.clone(), r.listening_port)),
        };
        if let Some((host, port)) = caught_up {
            tracing::info!("Failover target {host}:{port} is synced, failing over.");
            self.start_failover_switch(host, port);
        }
    }

    /// We become a replica of the target; our PSYNC carries `FAILOVER`.
    fn start_failover_switch(&mut self, host: String, port: u16) {
        let f = &mut self.repl.failover;
        f.state = FailoverState::InProgress;
        f.target = Some((host.clone(), port));
        self.replicaof(host, port);
    }

    /// The sync with the target ended: accepted (the failover is over) or
    /// not (we are a master again).
    pub fn failover_sync_done(&mut self, accepted: bool) {
        if !self.repl.failover.in_progress() {
            return;
        }
        if accepted {
            self.clear_failover_state();
        } else {
            self.abort_failover("Failover target rejected psync request");
        }
    }

    /// Redis's `abortFailover`.
    pub fn abort_failover(&mut self, why: &str) {
        let f = &self.repl.failover;
        if f.state == FailoverState::NoFailover {
            return;
        }
        match &f.target {
            Some((h, p)) => tracing::info!("FAILOVER to {h}:{p} aborted: {why}"),
            None => tracing::info!("FAILOVER to any replica aborted: {why}"),
        }
        if f.in_progress() {
            self.replicaof_no_one();
        }
        self.clear_failover_state();
    }

    fn clear_failover_state(&mut self) {
        self.repl.failover = Failover::default();
        self.unpause_clients(PausePurpose::Failover);
    }

    /// The target's side: `PSYNC <replid> <offset> FAILOVER` from our
    /// master, with our replid, makes us a master before the PSYNC is
    /// answered. `Err` is the error to answer instead.
    pub fn psync_failover_request(
        &mut self,
        replid: &[u8],
        peer: &str,
    ) -> Result<(), &'static str> {
        if replid != self.repl.replid.as_bytes() {
            return Err("ERR PSYNC FAILOVER replid must match my replid.");
        }
        if self.repl.is_replica() {
            self.replicaof_no_one();
            tracing::info!("MASTER MODE enabled (failover request from '{peer}')");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokv_resp::Args;

    fn args(v: &[&str]) -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut buf = Vec::new();
        let mut ranges = Vec::new();
        for a in v {
            ranges.push((buf.len(), a.len()));
            buf.extend_from_slice(a.as_bytes());
        }
        (buf, ranges)
    }

    type Parsed = (i64, bool, Option<(String, i64)>);

    fn parsed(v: &[&str]) -> Result<Parsed, &'static str> {
        let (b, r) = args(v);
        parse(&Args::new(&b, &r)).map(|r| (r.timeout_ms, r.force, r.to))
    }

    #[test]
    fn options_parse_as_redis_parses_them() {
        assert_eq!(parsed(&["failover"]), Ok((0, false, None)));
        assert_eq!(
            parsed(&["failover", "to", "h", "1", "timeout", "5", "force"]),
            Ok((5, true, Some(("h".into(), 1))))
        );
        assert_eq!(
            parsed(&["failover", "to"]),
            Err(crate::commands::err::SYNTAX)
        );
        assert_eq!(
            parsed(&["failover", "timeout", "0"]),
            Err("ERR FAILOVER timeout must be greater than 0")
        );
        assert_eq!(
            parsed(&["failover", "timeout", "1", "timeout", "2"]),
            Err(crate::commands::err::SYNTAX)
        );
        assert_eq!(
            parsed(&["failover", "to", "h", "x"]),
            Err(crate::commands::err::NOT_INTEGER)
        );
        assert_eq!(
            parsed(&["failover", "abort", "timeout", "5"]),
            Err(crate::commands::err::SYNTAX)
        );
    }
}
