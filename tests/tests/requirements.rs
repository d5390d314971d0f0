//! The requirement table (`docs/requirements.md`) against the code: every REQUIRED item of
//! the LNet Health and Multi-Rail documents names at least one test, and every test named
//! there is a test function in the file named. Also the documentation requirements of
//! LNet Health (doc-005, doc-010), checked against `docs/health.md`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};

use lnet::tunables::TunableName;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One row of the table: ID, class, tests (as `file::function`).
struct Row {
    id: String,
    class: String,
    tests: Vec<(String, String)>,
}

fn rows() -> Vec<Row> {
    let doc = read("docs/requirements.md");
    doc.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| ID "))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            let [id, class, _what, tests] = cells.as_slice() else {
                panic!("a row with other than four cells: {l}");
            };
            let tests = tests
                .split(", ")
                .filter(|t| t.contains("::"))
                .map(|t| {
                    let (file, func) = t.rsplit_once("::").unwrap();
                    (file.to_owned(), func.to_owned())
                })
                .collect();
            Row {
                id: (*id).to_owned(),
                class: (*class).to_owned(),
                tests,
            }
        })
        .collect()
}

/// Whether `file` holds `fn func` right under a test attribute (doc comments and other
/// attributes may sit between).
fn is_test_fn(file: &str, func: &str) -> bool {
    let text = read(file);
    let lines: Vec<&str> = text.lines().collect();
    let sig = format!("fn {func}(");
    lines.iter().enumerate().any(|(i, l)| {
        l.contains(&sig)
            && lines[..i]
                .iter()
                .rev()
                .take_while(|p| {
                    let p = p.trim();
                    p.starts_with("#[") || p.starts_with("///") || p.starts_with("//")
                })
                .any(|p| {
                    let p = p.trim();
                    p.starts_with("#[") && p.contains("test")
                })
    })
}

#[test]
fn every_required_item_names_a_test_and_every_named_test_exists() {
    let rows = rows();
    let prefixes = [
        "cfg-", "lnd-", "lnt-", "stt-", "dbg-", "tst-", "doc-", "snd-", "hlt-",
    ];
    assert!(rows.len() > 80, "the table has {} rows", rows.len());
    let mut problems = Vec::new();
    for r in &rows {
        if !prefixes.iter().any(|p| r.id.starts_with(p)) {
            problems.push(format!("{}: unknown ID", r.id));
        }
        if !["REQUIRED", "DESIRED", "NICE-TO-HAVE"].contains(&r.class.as_str()) {
            problems.push(format!("{}: unknown class {}", r.id, r.class));
        }
        if r.class == "REQUIRED" && r.tests.is_empty() {
            problems.push(format!("{}: REQUIRED without a test", r.id));
        }
        for (file, func) in &r.tests {
            if !root().join(file).is_file() {
                problems.push(format!("{}: no file {file}", r.id));
            } else if !is_test_fn(file, func) {
                problems.push(format!("{}: no test {func} in {file}", r.id));
            }
        }
    }
    // Every ID once.
    let mut ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    for w in ids.windows(2) {
        if w[0] == w[1] {
            problems.push(format!("{}: listed twice", w[0]));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_health_document_requirements_are_all_listed() {
    // The LNet Health document's REQUIRED items, by section, in its order.
    let ids: Vec<String> = rows().into_iter().map(|r| r.id).collect();
    let expected = (1..=7)
        .map(|i| format!("cfg-{:03}", i * 5))
        .chain((1..=12).map(|i| format!("lnd-{:03}", i * 5)))
        .chain((1..=23).map(|i| format!("lnt-{:03}", i * 5)))
        .chain((1..=8).map(|i| format!("stt-{:03}", i * 5)))
        .chain((1..=7).map(|i| format!("dbg-{:03}", i * 5)))
        .chain((1..=17).map(|i| format!("snd-{:03}", i * 5)))
        .chain((1..=5).map(|i| format!("hlt-{:03}", i * 5)));
    for id in expected {
        assert!(ids.contains(&id), "{id} is not in docs/requirements.md");
    }
}

#[test]
fn doc_005_every_tunable_is_documented() {
    let doc = read("docs/health.md");
    for name in TunableName::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", name.as_str())),
            "{name} has no row in docs/health.md"
        );
    }
}

#[test]
fn doc_010_the_timeout_derivation_is_documented() {
    let doc = read("docs/health.md");
    assert!(doc.contains("lnd_timeout = max((transaction_timeout - 1) / (retry_count + 1), 1)"));
    // The figure given is the one the code derives from the defaults.
    let t = lnet::tunables::Tunables::default();
    let lnd = lnet::timeouts::lnd_timeout_secs(t.transaction_timeout(), t.retry_count());
    assert!(
        doc.contains(&format!("({lnd} s with the defaults)")),
        "{lnd}"
    );
}
