//! Test hosts in network namespaces: each host is a namespace with its own
//! loopback and one veth link to a bridge in a namespace of its own, so a
//! test can cut a host off the others (`Net::cut`) and join it back
//! (`Net::heal`) while every process keeps running. Addresses are
//! `10.77.0.<host + 1>/24`, reachable only inside the test's namespaces;
//! the test itself talks to a host's processes through `ip netns exec`.
//! Everything the harness made is removed on drop.
//!
//! Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2;
//! [`Net::new`] returns `Err` with the reason when the machine cannot make
//! namespaces, so a test can say why it did not run.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Net {
    prefix: String,
    hosts: usize,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e} (is iproute2 installed?)", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Net {
    /// `hosts` namespaces on one bridge.
    pub fn new(hosts: usize) -> Result<Net, String> {
        let prefix = format!("fk{}", std::process::id());
        let net = Net { prefix, hosts: 0 };
        let br = net.bridge_ns();
        ip(&["netns", "add", &br])?;
        let mut net = net;
        ip(&["-n", &br, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &br, "link", "set", "br0", "up"])?;
        for h in 0..hosts {
            let ns = net.ns(h);
            ip(&["netns", "add", &ns])?;
            net.hosts = h + 1;
            let port = format!("v{h}");
            // Both ends are made inside the namespaces: nothing appears in
            // the test's own namespace.
            ip(&[
                "link", "add", &port, "netns", &br, "type", "veth", "peer", "name", "eth0",
                "netns", &ns,
            ])?;
            ip(&["-n", &br, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &br, "link", "set", &port, "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}/24", net.addr(h)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    fn bridge_ns(&self) -> String {
        format!("{}br", self.prefix)
    }

    /// The namespace of host `h`.
    pub fn ns(&self, h: usize) -> String {
        format!("{}h{h}", self.prefix)
    }

    /// Host `h`'s address on the bridge.
    pub fn addr(&self, h: usize) -> String {
        format!("10.77.0.{}", h + 1)
    }

    /// Cuts host `h` off the bridge: its packets, both ways, are dropped.
    pub fn cut(&self, h: usize) {
        ip(&[
            "-n",
            &self.bridge_ns(),
            "link",
            "set",
            &format!("v{h}"),
            "down",
        ])
        .unwrap();
    }

    /// Joins host `h` back to the bridge.
    pub fn heal(&self, h: usize) {
        ip(&[
            "-n",
            &self.bridge_ns(),
            "link",
            "set",
            &format!("v{h}"),
            "up",
        ])
        .unwrap();
    }

    /// Runs `argv` on host `h`.
    pub fn run(&self, h: usize, argv: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.ns(h)])
            .args(argv)
            .output()
            .expect("ip netns exec")
    }

    /// `redis-cli` on host `h`; its stdout and stderr together.
    pub fn cli(&self, h: usize, args: &[&str]) -> String {
        let mut argv = vec!["redis-cli"];
        argv.extend_from_slice(args);
        let out = self.run(h, &argv);
        let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
        s.push_str(&String::from_utf8_lossy(&out.stderr));
        s
    }

    /// Starts `bin args...` on host `h`, its output in `log`.
    pub fn spawn(&self, h: usize, bin: &str, args: &[&str], log: &PathBuf) -> Child {
        let log = std::fs::File::create(log).unwrap();
        Command::new("ip")
            .args(["netns", "exec", &self.ns(h), bin])
            .args(args)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"))
    }

    /// Waits until `port` on host `h`'s loopback answers PING.
    pub fn wait_ping(&self, h: usize, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.cli(h, &["-p", &port.to_string(), "PING"]).trim() == "PONG" {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nothing answers on host {h} port {port}");
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of each veth pair, and with
        // it the other end.
        for h in 0..self.hosts {
            let _ = ip(&["netns", "del", &self.ns(h)]);
        }
        let _ = ip(&["netns", "del", &self.bridge_ns()]);
    }
}
