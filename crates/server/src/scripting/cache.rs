//! The `EVAL` script cache: scripts by SHA1, compiled once (`SCRIPT LOAD`,
//! or the first `EVAL` of a body), kept until `SCRIPT FLUSH`, as in Redis
//! 7.0 (which never evicts them either).

use hashbrown::HashMap;

/// A cached script.
pub struct Script {
    pub body: Vec<u8>,
    /// The compiled body, in the EVAL engine's registry (an
    /// `mlua::Function` handle would take one of the ~8000 slots of mlua's
    /// reference stack for as long as the script is cached).
    pub func: mlua::RegistryKey,
    /// Its shebang flags (`sflags`), `EVAL_COMPAT` without one.
    pub flags: u32,
}

/// Scripts by lower-case hex SHA1.
#[derive(Default)]
pub struct ScriptCache {
    pub scripts: HashMap<[u8; 40], Script>,
    /// Bytes of the bodies (`used_memory_scripts_eval`).
    pub body_bytes: usize,
}

impl ScriptCache {
    pub fn get(&self, sha: &[u8]) -> Option<&Script> {
        let key = normalize(sha)?;
        self.scripts.get(&key)
    }

    pub fn contains(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }

    pub fn insert(&mut self, sha: [u8; 40], script: Script) {
        self.body_bytes += script.body.len() + std::mem::size_of::<Script>() + 40;
        if let Some(old) = self.scripts.insert(sha, script) {
            self.body_bytes -= old.body.len() + std::mem::size_of::<Script>() + 40;
        }
    }

    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }
}

/// A SHA1 argument as the cache's key: 40 characters, case-insensitive.
pub fn normalize(sha: &[u8]) -> Option<[u8; 40]> {
    if sha.len() != 40 {
        return None;
    }
    let mut key = [0u8; 40];
    for (d, s) in key.iter_mut().zip(sha) {
        *d = s.to_ascii_lowercase();
    }
    Some(key)
}

/// Lower-case hex SHA1 of `data` (Redis's `sha1hex`).
pub fn sha1_hex(data: &[u8]) -> String {
    use sha1::{Digest, Sha1};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(40);
    for b in Sha1::digest(data) {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha1_of_empty_is_the_known_digest() {
        assert_eq!(
            super::sha1_hex(b""),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
    }
}
