//! Crash safety: a child process applies the workload's stream of 1,000 configuration
//! changes to a store, printing `ack N` once change N is durable; the test kills it with
//! SIGKILL at random points, 100 times, reopens the store each time and checks that it
//! holds exactly the state after the last acknowledged change or the one after it (the
//! change in flight may have become durable before its ack was printed), never anything
//! else. The next child resumes the stream from the state found, so the kills land all
//! along the stream, in imports, deletes and event appends alike; when the stream is
//! done the store starts over empty.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../src/bin/store-crash-child/workload.rs"]
#[allow(dead_code)]
mod workload;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use store::Store;

const SEED: u64 = 0x5EED_0001;
const STREAM_LEN: usize = 1000;
const KILLS: usize = 100;
/// Most acks a child is let print before it is killed.
const MAX_ACKS_BEFORE_KILL: u64 = 24;
/// Most iterations of the busy wait between the chosen ack and the kill.
const MAX_SPIN: u64 = 400_000;

/// The state after each prefix of the stream: `states[n]` after change `n`.
fn reference_states(changes: &[workload::Change]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path().join("ref"), workload::options()).unwrap();
    let mut states = vec![workload::snapshot(&store).unwrap()];
    for (i, c) in changes.iter().enumerate() {
        workload::apply(&store, c).unwrap_or_else(|e| panic!("change {}: {e}", i + 1));
        states.push(workload::snapshot(&store).unwrap());
    }
    states
}

fn spin(iterations: u64) {
    let mut x = 0u64;
    for i in 0..iterations {
        x = std::hint::black_box(x.wrapping_add(i));
    }
    std::hint::black_box(x);
}

/// Runs one child from change `from`, kills it after `acks` acks (or before any when 0)
/// and a busy wait of `spin_for`; returns the last change it acknowledged and whether it
/// had finished the stream.
fn run_child(dir: &Path, from: usize, acks: u64, spin_for: u64) -> (usize, bool) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_store-crash-child"))
        .arg(dir)
        .arg(SEED.to_string())
        .arg(from.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut last_ack = from;
    let mut done = false;
    let mut seen = 0u64;
    if acks == 0 {
        spin(spin_for);
    } else {
        for line in lines.by_ref() {
            let line = line.unwrap();
            if line == "done" {
                done = true;
                break;
            }
            last_ack = line.strip_prefix("ack ").unwrap().parse().unwrap();
            seen += 1;
            if seen == acks {
                spin(spin_for);
                break;
            }
        }
    }
    // SIGKILL on Unix: no destructor, no flush, the process stops where it is.
    let _ = child.kill();
    let status = child.wait().unwrap();
    // Whatever the child printed before it died is acknowledged too.
    for line in lines {
        let line = line.unwrap();
        if line == "done" {
            done = true;
        } else {
            last_ack = line.strip_prefix("ack ").unwrap().parse().unwrap();
        }
    }
    assert!(
        done || !status.success(),
        "the child exited on its own without finishing: {status}"
    );
    (last_ack, done)
}

#[test]
fn sigkill_at_random_points_leaves_the_last_acked_state_or_the_next() {
    let changes = workload::stream(SEED, STREAM_LEN);
    let states = reference_states(&changes);
    let mut rng = workload::Rng::new(0xC0FFEE);
    let root = tempfile::tempdir().unwrap();
    let mut generation = 0;
    let mut dir = root.path().join(format!("store{generation}"));
    let mut at = 0usize;
    let (mut at_ack, mut after_ack, mut finished) = (0, 0, 0);
    let (mut imports_in_flight, mut imports_landed) = (0, 0);
    for kill in 0..KILLS {
        let acks = rng.below(MAX_ACKS_BEFORE_KILL + 1);
        let spin_for = rng.below(MAX_SPIN + 1);
        let (last_ack, done) = run_child(&dir, at, acks, spin_for);
        let store = Store::open_with(&dir, workload::options())
            .unwrap_or_else(|e| panic!("kill {kill}: reopening failed: {e}"));
        let found = workload::snapshot(&store)
            .unwrap_or_else(|e| panic!("kill {kill}: reading failed: {e}"));
        drop(store);
        let in_flight_import = matches!(changes.get(last_ack), Some(workload::Change::Import(_)));
        imports_in_flight += usize::from(in_flight_import);
        if found == states[last_ack] {
            at_ack += 1;
            at = last_ack;
        } else if last_ack < STREAM_LEN && found == states[last_ack + 1] {
            after_ack += 1;
            imports_landed += usize::from(in_flight_import);
            at = last_ack + 1;
        } else {
            let close = states.iter().position(|s| *s == found);
            panic!(
                "kill {kill}: last ack {last_ack}, but the store holds {}:\n{found}",
                close.map_or("a state after no prefix of the stream".to_owned(), |n| {
                    format!("the state after change {n}")
                })
            );
        }
        if done || at == STREAM_LEN {
            finished += 1;
            generation += 1;
            dir = root.path().join(format!("store{generation}"));
            at = 0;
        }
    }
    eprintln!(
        "{KILLS} kills: {at_ack} at the last ack, {after_ack} one change after it; \
         {imports_in_flight} with an import in flight ({imports_landed} of them landed); \
         the stream of {STREAM_LEN} changes ran to its end {finished} times"
    );
    assert_eq!(at_ack + after_ack, KILLS);
}
