//! The node table's text form: `CLUSTER NODES` lines and `nodes.conf`
//! (the same lines, then `vars currentEpoch N lastVoteEpoch N`), as Redis
//! 7.0's `clusterGenNodeDescription` writes them and `clusterLoadConfig`
//! reads them:
//!
//! `<id> <ip>:<port>@<cport>[,<hostname>] <flags> <master-id|-> <ping-sent-ms>
//! <pong-received-ms> <config-epoch> connected|disconnected <slots...>`
//!
//! with slots as `N` or `N-M`, and on the node's own line the slots it is
//! migrating (`[N->-<id>]`) or importing (`[N-<-<id>]`).

use super::bus::{node_flags, SlotBitmap};
use ferrokv_store::slots::SLOTS;

/// One node as the table knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    pub id: String,
    pub ip: String,
    pub port: u16,
    pub cport: u16,
    /// Empty when the node announces none.
    pub hostname: String,
    /// [`node_flags`] bits.
    pub flags: u16,
    /// The master's id, for a replica.
    pub master: Option<String>,
    pub ping_sent_ms: u64,
    pub pong_received_ms: u64,
    pub config_epoch: u64,
    pub connected: bool,
    pub slots: SlotBitmap,
    pub migrating: Vec<(u16, String)>,
    pub importing: Vec<(u16, String)>,
}

/// `nodes.conf`: the nodes (ours among them, flagged `myself`) and the
/// epochs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodesConf {
    pub nodes: Vec<NodeEntry>,
    pub current_epoch: u64,
    pub last_vote_epoch: u64,
}

/// Redis's flag names, in the order it prints them.
const FLAG_NAMES: [(u16, &str); 8] = [
    (node_flags::MYSELF, "myself"),
    (node_flags::MASTER, "master"),
    (node_flags::SLAVE, "slave"),
    (node_flags::PFAIL, "fail?"),
    (node_flags::FAIL, "fail"),
    (node_flags::HANDSHAKE, "handshake"),
    (node_flags::NOADDR, "noaddr"),
    (node_flags::NOFAILOVER, "nofailover"),
];

/// `myself,master`, or `noflags`.
pub fn flags_text(flags: u16) -> String {
    let names: Vec<&str> = FLAG_NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        "noflags".into()
    } else {
        names.join(",")
    }
}

/// Redis ignores `noflags` and unknown words alike.
fn parse_flags(text: &str) -> u16 {
    text.split(',')
        .filter_map(|name| FLAG_NAMES.iter().find(|(_, n)| *n == name))
        .fold(0, |flags, (bit, _)| flags | bit)
}

/// The slot ranges of `slots`: `0-100 5000 16383`.
pub fn slot_ranges(slots: &SlotBitmap) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    let mut start: Option<u16> = None;
    for s in 0..SLOTS as u16 {
        match (slots.get(s), start) {
            (true, None) => start = Some(s),
            (false, Some(a)) => {
                out.push((a, s - 1));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(a) = start {
        out.push((a, SLOTS as u16 - 1));
    }
    out
}

impl NodeEntry {
    /// The `CLUSTER NODES` line (without its newline).
    pub fn line(&self) -> String {
        let mut l = format!("{} {}:{}@{}", self.id, self.ip, self.port, self.cport);
        if !self.hostname.is_empty() {
            l.push(',');
            l.push_str(&self.hostname);
        }
        l.push(' ');
        l.push_str(&flags_text(self.flags));
        l.push(' ');
        l.push_str(self.master.as_deref().unwrap_or("-"));
        l.push_str(&format!(
            " {} {} {} {}",
            self.ping_sent_ms,
            self.pong_received_ms,
            self.config_epoch,
            if self.connected || self.flags & node_flags::MYSELF != 0 {
                "connected"
            } else {
                "disconnected"
            }
        ));
        for (a, b) in slot_ranges(&self.slots) {
            if a == b {
                l.push_str(&format!(" {a}"));
            } else {
                l.push_str(&format!(" {a}-{b}"));
            }
        }
        if self.flags & node_flags::MYSELF != 0 {
            for (s, id) in &self.migrating {
                l.push_str(&format!(" [{s}->-{id}]"));
            }
            for (s, id) in &self.importing {
                l.push_str(&format!(" [{s}-<-{id}]"));
            }
        }
        l
    }

    /// Reads one node line (Redis's `clusterLoadConfig` rules: at least 8
    /// fields; an address without `@cport` is the pre-4.0 form, bus port
    /// = port + 10000).
    pub fn parse(line: &str) -> Result<NodeEntry, String> {
        let f: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        if f.len() < 8 {
            return Err(format!("too few fields in {line:?}"));
        }
        if f[0].len() != 40 {
            return Err(format!("bad node id {:?}", f[0]));
        }
        let (addr, hostname) = match f[1].split_once(',') {
            Some((a, h)) => (a, h.to_string()),
            None => (f[1], String::new()),
        };
        let (hostport, cport) = match addr.split_once('@') {
            Some((hp, c)) => (hp, Some(c)),
            None => (addr, None),
        };
        let colon = hostport
            .rfind(':')
            .ok_or_else(|| format!("bad address {addr:?}"))?;
        let num = |s: &str, what: &str| -> Result<u64, String> {
            s.parse::<u64>().map_err(|_| format!("bad {what} {s:?}"))
        };
        let port = num(&hostport[colon + 1..], "port")? as u16;
        let cport = match cport {
            Some(c) => num(c, "bus port")? as u16,
            None => port.wrapping_add(10000),
        };
        let mut node = NodeEntry {
            id: f[0].to_string(),
            ip: hostport[..colon].to_string(),
            port,
            cport,
            hostname,
            flags: parse_flags(f[2]),
            master: (f[3] != "-").then(|| f[3].to_string()),
            ping_sent_ms: num(f[4], "ping time")?,
            pong_received_ms: num(f[5], "pong time")?,
            config_epoch: num(f[6], "config epoch")?,
            connected: f[7] == "connected",
            slots: SlotBitmap::default(),
            migrating: Vec::new(),
            importing: Vec::new(),
        };
        let slot = |s: &str| -> Result<u16, String> {
            match s.parse::<u16>() {
                Ok(n) if (n as usize) < SLOTS => Ok(n),
                _ => Err(format!("bad slot {s:?}")),
            }
        };
        for w in &f[8..] {
            if let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                if let Some((s, id)) = inner.split_once("->-") {
                    node.migrating.push((slot(s)?, id.to_string()));
                } else if let Some((s, id)) = inner.split_once("-<-") {
                    node.importing.push((slot(s)?, id.to_string()));
                } else {
                    return Err(format!("bad slot entry {w:?}"));
                }
                continue;
            }
            let (a, b) = match w.split_once('-') {
                Some((a, b)) => (slot(a)?, slot(b)?),
                None => (slot(w)?, slot(w)?),
            };
            if a > b {
                return Err(format!("bad slot range {w:?}"));
            }
            for s in a..=b {
                node.slots.set(s, true);
            }
        }
        Ok(node)
    }
}

impl NodesConf {
    /// `nodes.conf`'s text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for n in &self.nodes {
            out.push_str(&n.line());
            out.push('\n');
        }
        out.push_str(&format!(
            "vars currentEpoch {} lastVoteEpoch {}\n",
            self.current_epoch, self.last_vote_epoch
        ));
        out
    }

    /// Reads `nodes.conf`; exactly one node must be `myself`.
    pub fn parse(text: &str) -> Result<NodesConf, String> {
        let mut conf = NodesConf::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            if let Some(vars) = line.strip_prefix("vars ") {
                let w: Vec<&str> = vars.split(' ').collect();
                for kv in w.chunks(2) {
                    let value = kv
                        .get(1)
                        .and_then(|v| v.parse::<u64>().ok())
                        .ok_or_else(|| format!("line {}: bad vars", i + 1))?;
                    match kv[0] {
                        "currentEpoch" => conf.current_epoch = value,
                        "lastVoteEpoch" => conf.last_vote_epoch = value,
                        _ => {}
                    }
                }
                continue;
            }
            conf.nodes
                .push(NodeEntry::parse(line).map_err(|e| format!("line {}: {e}", i + 1))?);
        }
        let mine = conf
            .nodes
            .iter()
            .filter(|n| n.flags & node_flags::MYSELF != 0)
            .count();
        if mine != 1 {
            return Err(format!("{mine} nodes flagged myself"));
        }
        Ok(conf)
    }

    pub fn myself(&self) -> &NodeEntry {
        self.nodes
            .iter()
            .find(|n| n.flags & node_flags::MYSELF != 0)
            .expect("checked by parse")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by redis-server 7.0.15 (`CLUSTER ADDSLOTSRANGE 0 100`,
    /// `ADDSLOTS 5000 16383`, a replica met, `SETSLOT ... MIGRATING` and
    /// `IMPORTING`).
    const REDIS_CONF: &str = "45c91a8f5c769e8dcaad9729cbc904bda2f1f0b5 127.0.0.1:7301@17301,host-a myself,master - 0 0 1 connected 0-100 5000 16383 [100->-acc1335de7b24a044c0129df1a81123577e9d407] [200-<-acc1335de7b24a044c0129df1a81123577e9d407]
acc1335de7b24a044c0129df1a81123577e9d407 127.0.0.1:7302@17302 slave 45c91a8f5c769e8dcaad9729cbc904bda2f1f0b5 0 1796303623682 1 connected
vars currentEpoch 1 lastVoteEpoch 0
";

    #[test]
    fn a_redis_nodes_conf_reads_and_writes_back_the_same() {
        let conf = NodesConf::parse(REDIS_CONF).unwrap();
        assert_eq!(conf.render(), REDIS_CONF);
        let me = conf.myself();
        assert_eq!(me.hostname, "host-a");
        assert_eq!(me.cport, 17301);
        assert_eq!(me.slots.count(), 101 + 1 + 1);
        assert!(me.slots.get(16383) && !me.slots.get(101));
        assert_eq!(me.migrating[0].0, 100);
        assert_eq!(me.importing[0].0, 200);
        let r = &conf.nodes[1];
        assert_eq!(r.flags, node_flags::SLAVE);
        assert_eq!(r.master.as_deref(), Some(me.id.as_str()));
        assert_eq!(r.pong_received_ms, 1796303623682);
        assert_eq!(conf.current_epoch, 1);
    }

    #[test]
    fn old_addresses_flags_and_errors() {
        let n = NodeEntry::parse(
            "0123456789012345678901234567890123456789 10.0.0.1:6379 master,fail?,nofailover - 5 6 7 disconnected",
        )
        .unwrap();
        assert_eq!(n.cport, 16379);
        assert_eq!(
            n.flags,
            node_flags::MASTER | node_flags::PFAIL | node_flags::NOFAILOVER
        );
        assert!(!n.connected);
        assert_eq!(flags_text(0), "noflags");
        assert!(NodeEntry::parse("short line").is_err());
        assert!(NodeEntry::parse(
            "0123456789012345678901234567890123456789 10.0.0.1:6379@1 master - 0 0 0 connected 16384"
        )
        .is_err());
        assert!(NodeEntry::parse(
            "0123456789012345678901234567890123456789 10.0.0.1:6379@1 master - 0 0 0 connected 9-3"
        )
        .is_err());
        assert!(NodesConf::parse("vars currentEpoch 1 lastVoteEpoch 0\n").is_err());
    }
}
