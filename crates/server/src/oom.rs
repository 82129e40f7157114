//! `oom-score-adj` and `oom-score-adj-values` (Redis 7.0's
//! `setOOMScoreAdj`): the kernel's OOM-killer preference for this process,
//! written to `/proc/self/oom_score_adj`. The values are for a master, a
//! replica and a background child (ferrokv forks none: its snapshots are
//! fork-free, so the third value is kept for Redis's config and not used).
//! `yes`/`relative` add the value to the score the process had when
//! ferrokv first took control, `absolute` writes it as given, both clamped
//! to [-1000, 1000]; `no` after either puts that first score back. Applied
//! at start-up, by `CONFIG SET` (a score the kernel refuses fails it, in
//! Redis's words), and from the cron when the role changes.

use crate::config::Config;

const PATH: &str = "/proc/self/oom_score_adj";

/// What ferrokv did to the process's score.
#[derive(Default)]
pub struct OomScore {
    /// The score before ferrokv first set one (to put back with `no`).
    base: Option<i32>,
    /// The score last written, with the role it was for.
    applied: Option<(i32, bool)>,
    /// The role the cron last brought the score in line with: the cron
    /// acts only when it changes (CONFIG SET applies its own changes).
    role: Option<bool>,
}

/// The mode and the three values, as configured.
fn configured(cfg: &Config) -> (String, [i32; 3]) {
    let mode = cfg.option_value("oom-score-adj");
    let mut v = [0, 200, 800];
    for (i, w) in cfg
        .option_value("oom-score-adj-values")
        .split_whitespace()
        .take(3)
        .enumerate()
    {
        v[i] = w.parse().unwrap_or(v[i]);
    }
    (mode, v)
}

fn read_score() -> Result<i32, String> {
    let text =
        std::fs::read_to_string(PATH).map_err(|e| format!("Unable to read oom_score_adj: {e}"))?;
    text.trim()
        .parse()
        .map_err(|_| format!("Unable to read oom_score_adj: {text:?}"))
}

fn write_score(v: i32) -> Result<(), String> {
    std::fs::write(PATH, format!("{v}\n"))
        .map_err(|e| format!("Unable to write oom_score_adj: {e}"))
}

impl OomScore {
    /// Brings the process's score in line with `cfg` and the role
    /// (`replica`); does nothing when it already is.
    pub fn apply(&mut self, cfg: &Config, replica: bool) -> Result<(), String> {
        let (mode, values) = configured(cfg);
        if mode == "no" {
            // Ours to undo only if we changed it.
            if let (Some(base), Some(_)) = (self.base, self.applied) {
                write_score(base)?;
                self.applied = None;
            }
            return Ok(());
        }
        let base = match self.base {
            Some(b) => b,
            None => {
                let b = read_score()?;
                self.base = Some(b);
                b
            }
        };
        let mut v = values[usize::from(replica)];
        if mode != "absolute" {
            v = v.saturating_add(base);
        }
        let v = v.clamp(-1000, 1000);
        if self.applied == Some((v, replica)) {
            return Ok(());
        }
        write_score(v)?;
        self.applied = Some((v, replica));
        Ok(())
    }

    /// From the cron: at start-up and after a role change (REPLICAOF, a
    /// failover), the score for the role; a failure is logged, not
    /// retried until the role changes again.
    pub fn tick(&mut self, cfg: &Config, replica: bool) {
        if self.role == Some(replica) {
            return;
        }
        self.role = Some(replica);
        if let Err(e) = self.apply(cfg, replica) {
            tracing::warn!("{e}");
        }
    }
}
