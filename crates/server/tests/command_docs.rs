//! Guards COMMAND's metadata against redis-server 7.0.15, in RESP3 (the
//! reply types matter there): for every command and subcommand both
//! servers have, `COMMAND INFO` (flags, key range, ACL categories, tips,
//! key specs) and `COMMAND DOCS` (summary, since, group, complexity,
//! history, doc flags, arguments with their key-spec indexes) equal
//! Redis's, a container listing only the subcommands ferrokv has;
//! `COMMAND COUNT`, `COMMAND LIST` and `COMMAND INFO` agree with each
//! other; `COMMAND LIST FILTERBY ACLCAT|PATTERN|MODULE` answers as Redis
//! over the common commands.
//!
//! The commands whose forms a newer Redis extended and ferrokv serves as
//! that version does (`newer()`: gen_command_docs.py's `NEWER`) are compared with Redis 7.4.1 from
//! `../shared/peers/` instead (skipped where this clone has none).
//!
//! Needs both servers at once: ferrokv only (`FERROKV_TESTS_TARGET=redis`
//! skips it).
mod common;
use common::reply::against_redis;
use common::{Peer, Raw, ServerProcess};
use ferrokv_resp::Frame;
use std::collections::BTreeSet;

fn text(f: &Frame) -> String {
    match f {
        Frame::Bulk(b) | Frame::Simple(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("{other:?}"),
    }
}

fn names(r: &mut Raw, args: &[&str]) -> BTreeSet<String> {
    match r.cmd(args) {
        Frame::Array(v) | Frame::Set(v) => v.iter().map(text).collect(),
        other => panic!("{args:?}: {other:?}"),
    }
}

/// `COMMAND INFO` entry with the subcommands (element 9) kept to `keep`.
fn keep_subs(e: &Frame, keep: &BTreeSet<String>) -> Frame {
    let Frame::Array(f) = e else { panic!("{e:?}") };
    let mut f = f.clone();
    let subs = match &f[9] {
        Frame::Array(v) | Frame::Set(v) => v.clone(),
        other => panic!("{other:?}"),
    };
    // Redis lists them in its hash table's order: compared sorted.
    let mut kept: Vec<Frame> = subs
        .into_iter()
        .filter(|s| matches!(s, Frame::Array(x) if keep.contains(&text(&x[0]))))
        .map(|s| keep_subs(&s, keep))
        .collect();
    kept.sort_by_key(|s| match s {
        Frame::Array(x) => text(&x[0]),
        _ => String::new(),
    });
    f[9] = match &f[9] {
        Frame::Set(_) => Frame::Set(kept),
        _ => Frame::Array(kept),
    };
    Frame::Array(f)
}

/// A `COMMAND DOCS` value with its `subcommands` map kept to `keep`.
fn keep_doc_subs(d: &Frame, keep: &BTreeSet<String>) -> Frame {
    let Frame::Map(fields) = d else {
        panic!("{d:?}")
    };
    Frame::Map(
        fields
            .iter()
            .map(|(k, v)| match (text(k).as_str(), v) {
                ("subcommands", Frame::Map(subs)) => {
                    // In Redis's hash table's order: compared sorted.
                    let mut kept: Vec<(Frame, Frame)> = subs
                        .iter()
                        .filter(|(n, _)| keep.contains(&text(n)))
                        .map(|(n, d)| (n.clone(), keep_doc_subs(d, keep)))
                        .collect();
                    kept.sort_by_key(|(n, _)| text(n));
                    (k.clone(), Frame::Map(kept))
                }
                _ => (k.clone(), v.clone()),
            })
            .collect(),
    )
}

/// Commands and subcommands described as Redis 7.4 describes them: the
/// `NEWER` list of scripts/gen_command_docs.py, which wrote them so.
fn newer() -> Vec<String> {
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/gen_command_docs.py"),
    )
    .unwrap();
    let list = script
        .split_once("\nNEWER = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("NEWER = [...] in gen_command_docs.py")
        .0;
    let names: Vec<String> = list
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 8, "{names:?}");
    names
}

#[test]
fn command_info_and_docs_are_redis_s() {
    if against_redis() {
        return;
    }
    let f = ServerProcess::ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let (mut fr, mut rr) = (f.raw(), redis.raw());
    fr.cmd(&["HELLO", "3"]);
    rr.cmd(&["HELLO", "3"]);
    let ours = names(&mut fr, &["COMMAND", "LIST"]);
    let mut theirs = names(&mut rr, &["COMMAND", "LIST"]);
    // Compared with Redis 7.4 below; a container's other subcommands here.
    let newer_names = newer();
    for n in &newer_names {
        theirs.remove(n);
    }
    if let Some(newer) = ServerProcess::peer(Peer::Redis74, &[]) {
        let mut nr = newer.raw();
        nr.cmd(&["HELLO", "3"]);
        for n in &newer_names {
            let n = n.as_str();
            assert!(ours.contains(n), "{n}");
            let (a, b) = (
                fr.cmd(&["COMMAND", "INFO", n]),
                nr.cmd(&["COMMAND", "INFO", n]),
            );
            let (Frame::Array(a), Frame::Array(b)) = (&a, &b) else {
                panic!("{a:?} {b:?}")
            };
            let none = BTreeSet::new();
            assert_eq!(
                keep_subs(&a[0], &none),
                keep_subs(&b[0], &none),
                "COMMAND INFO {n} (Redis 7.4.1's)"
            );
            let (a, b) = (
                fr.cmd(&["COMMAND", "DOCS", n]),
                nr.cmd(&["COMMAND", "DOCS", n]),
            );
            assert_eq!(a, b, "COMMAND DOCS {n} (Redis 7.4.1's)");
        }
    }
    let common: Vec<&String> = ours.intersection(&theirs).collect();
    assert!(common.len() > 300, "{}", common.len());
    let mut checked = 0;
    for n in &common {
        let a = fr.cmd(&["COMMAND", "INFO", n]);
        let b = rr.cmd(&["COMMAND", "INFO", n]);
        let (Frame::Array(a), Frame::Array(b)) = (&a, &b) else {
            panic!("{a:?} {b:?}")
        };
        let both: BTreeSet<String> = ours.intersection(&theirs).cloned().collect();
        assert_eq!(
            keep_subs(&a[0], &both),
            keep_subs(&b[0], &both),
            "COMMAND INFO {n}"
        );
        let a = fr.cmd(&["COMMAND", "DOCS", n]);
        let b = rr.cmd(&["COMMAND", "DOCS", n]);
        let (Frame::Map(a), Frame::Map(b)) = (&a, &b) else {
            panic!("{a:?} {b:?}")
        };
        assert_eq!(a.len(), 1, "{n}");
        assert_eq!(a[0].0, b[0].0);
        let both: BTreeSet<String> = ours.intersection(&theirs).cloned().collect();
        assert_eq!(
            keep_doc_subs(&a[0].1, &both),
            keep_doc_subs(&b[0].1, &both),
            "COMMAND DOCS {n}"
        );
        checked += 1;
    }
    assert_eq!(checked, common.len());
}

#[test]
fn count_list_and_info_agree_and_filters_answer_as_redis() {
    if against_redis() {
        return;
    }
    let f = ServerProcess::ferrokv(&[]);
    let redis = ServerProcess::redis(&[]);
    let (mut fr, mut rr) = (f.raw(), redis.raw());
    let top: BTreeSet<String> = names(&mut fr, &["COMMAND", "LIST"])
        .into_iter()
        .filter(|n| !n.contains('|'))
        .collect();
    let Frame::Integer(count) = fr.cmd(&["COMMAND", "COUNT"]) else {
        panic!("COMMAND COUNT")
    };
    let Frame::Array(all) = fr.cmd(&["COMMAND", "INFO"]) else {
        panic!("COMMAND INFO")
    };
    assert_eq!(count as usize, all.len());
    let infos: BTreeSet<String> = all
        .iter()
        .map(|e| match e {
            Frame::Array(f) => text(&f[0]),
            other => panic!("{other:?}"),
        })
        .collect();
    // COMMAND LIST names subcommands too; COUNT and INFO count containers.
    assert_eq!(infos, top);
    let ours = names(&mut fr, &["COMMAND", "LIST"]);
    let theirs = names(&mut rr, &["COMMAND", "LIST"]);
    for filter in [
        &["ACLCAT", "hyperloglog"][..],
        &["ACLCAT", "write"],
        &["ACLCAT", "dangerous"],
        &["ACLCAT", "keyspace"],
        &["ACLCAT", "FAST"],
        &["ACLCAT", "nosuch"],
        &["PATTERN", "x*"],
        &["PATTERN", "*|help"],
        &["PATTERN", "CLIENT*"],
        &["MODULE", "nosuch"],
    ] {
        let mut args = vec!["COMMAND", "LIST", "FILTERBY"];
        args.extend_from_slice(filter);
        let a: BTreeSet<String> = names(&mut fr, &args)
            .into_iter()
            .filter(|n| theirs.contains(n))
            .collect();
        let b: BTreeSet<String> = names(&mut rr, &args)
            .into_iter()
            .filter(|n| ours.contains(n))
            .collect();
        assert_eq!(a, b, "{filter:?}");
    }
    for bad in [
        &["COMMAND", "LIST", "FILTERBY", "foo", "bar"][..],
        &["COMMAND", "LIST", "FILTERBY"],
    ] {
        assert_eq!(fr.cmd(bad), rr.cmd(bad), "{bad:?}");
    }
}
