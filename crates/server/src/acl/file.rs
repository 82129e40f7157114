//! ACL files (`aclfile`, `ACL LOAD`, `ACL SAVE`) and the config file's
//! `user` lines, in Redis's syntax, so a users file moves between ferrokv
//! and Redis unchanged: one `user <name> <rule> ...` per line, arguments
//! separated by single spaces, `#` comments.
//!
//! Loading is all or nothing: every line is checked, every error is
//! collected with its line number in Redis's words, and the active users
//! change only if there was none. Saving writes a temporary file beside
//! the target, syncs it and renames it over, so a crash leaves the old
//! file or the new one, never half of one.

use super::user::{bad_name, merge_selector_args, RuleError, User};
use super::Catalog;

/// Parses an ACL file's text into users (`filename` for the messages).
pub fn parse(
    text: &[u8],
    filename: &str,
    catalog: &Catalog,
    all_channels: bool,
) -> Result<Vec<User>, String> {
    let mut errors = String::new();
    let mut users: Vec<User> = Vec::new();
    let mut seen: Vec<Vec<u8>> = Vec::new();
    for (i, raw) in text.split(|&c| c == b'\n').enumerate() {
        let linenum = i + 1;
        let line = trim(raw, b" \t\r\n");
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let argv: Vec<&[u8]> = line.split(|&c| c == b' ').collect();
        if argv[0] != b"user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{filename}:{linenum} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if bad_name(name) {
            errors.push_str(&format!(
                "'{filename}:{linenum}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if seen.iter().any(|n| n == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {linenum}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        seen.push(name.to_vec());
        let mut u = User::new(name, catalog, all_channels);
        let args = match merge_selector_args(&argv[2..]) {
            Ok(a) => a,
            Err(_) => {
                errors.push_str(&format!(
                    "{filename}:{linenum}: Unmatched parenthesis in selector definition."
                ));
                Vec::new()
            }
        };
        let mut syntax_error = false;
        for a in &args {
            let a = trim(a, b"\t\r\n");
            if let Err(e) = u.apply(catalog, all_channels, a) {
                if e == RuleError::Unknown {
                    errors.push_str(&format!(
                        "{filename}:{linenum}: Error in applying operation '{}': {}. ",
                        String::from_utf8_lossy(a),
                        e.text()
                    ));
                } else if !syntax_error {
                    errors.push_str(&format!("{filename}:{linenum}: {}. ", e.text()));
                    syntax_error = true;
                }
            }
        }
        if errors.is_empty() {
            users.push(u);
        }
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        Err(errors)
    }
}

fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|c| !set.contains(c)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|c| !set.contains(c))
        .map_or(start, |e| e + 1);
    &s[start..end]
}

/// The file's text: `user <name> <description>` per user, by name.
pub fn render(acl: &super::Acl) -> Vec<u8> {
    let mut out = Vec::new();
    for (_, u) in acl.users() {
        out.extend_from_slice(b"user ");
        out.extend_from_slice(&u.name);
        out.push(b' ');
        out.extend_from_slice(u.describe(&acl.catalog).as_bytes());
        out.push(b'\n');
    }
    out
}

/// Applies the config file's `user` lines (each the words after `user`)
/// to a fresh set, as Redis's `ACLLoadConfiguredUsers`: `Err` names the
/// rule refused, in Redis's words.
pub fn from_config_lines(
    lines: &[Vec<String>],
    catalog: &Catalog,
    all_channels: bool,
) -> Result<Vec<User>, String> {
    let mut users: Vec<User> = Vec::new();
    for words in lines {
        let Some(name) = words.first() else { continue };
        if bad_name(name.as_bytes()) {
            return Err(format!(
                "Error in user declaration '{name}': Usernames can't contain spaces or null characters"
            ));
        }
        if users.iter().any(|u| u.name == name.as_bytes()) {
            return Err(format!(
                "Error in user declaration '{name}': {}",
                "Duplicate user found. A user can only be defined once in config files"
            ));
        }
        let argv: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
        let args = merge_selector_args(&argv).map_err(|j| {
            format!(
                "Error in user declaration '{}': Unmatched parenthesis in acl selector starting at '{}'.",
                name, words[1 + j]
            )
        })?;
        let mut u = User::new(name.as_bytes(), catalog, all_channels);
        if name == "default" {
            // Redis resets the default user before its line's rules.
            let _ = u.apply(catalog, all_channels, b"reset");
        }
        for a in &args {
            u.apply(catalog, all_channels, a).map_err(|e| {
                format!(
                    "Error in user declaration '{}': {}",
                    String::from_utf8_lossy(a),
                    e.text()
                )
            })?;
        }
        users.push(u);
    }
    Ok(users)
}
