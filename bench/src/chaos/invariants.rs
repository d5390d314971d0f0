//! What a chaos run must show at its end, and its summary: every transaction ended, no
//! PUT delivered twice to B, every payload intact, every router's state equal to the
//! changes its API acknowledged (after each restart and at the end), every API change
//! answered, no panic in any router's log, and traffic flowing again once every failure
//! is repaired.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::routers::ApiOutcome;
use super::schedule::{Overlaps, KINDS};
use super::traffic::TrafficCounts;

/// The summary of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// The seed.
    pub seed: u64,
    /// The span asked for, minutes (unless `steps`).
    pub minutes: f64,
    /// The number of actions asked for, instead of a span.
    pub steps: Option<u64>,
    /// Seconds the run took (schedule and drain).
    pub elapsed_s: f64,
    /// Actions done, by kind ([`KINDS`]).
    pub actions: BTreeMap<String, u64>,
    /// What the schedule overlaps (the same for every run of the seed).
    pub overlaps: Overlaps,
    /// Router restarts (after a kill).
    pub restarts: u64,
    /// API changes acknowledged.
    pub api_acked: u64,
    /// API changes with nothing to do (what they would change was not made before).
    pub api_nothing: u64,
    /// API changes refused at connect while their router was killed or down (not made).
    pub api_not_sent: u64,
    /// API changes whose answer was lost while their router was killed (unsure).
    pub api_unsure: u64,
    /// Unsure changes the router showed made at the next comparison.
    pub unsure_made: u64,
    /// Unsure changes the router showed not made.
    pub unsure_not_made: u64,
    /// The traffic.
    pub traffic: TrafficCounts,
    /// PUTs B received (duplicates included).
    pub delivered: u64,
    /// PUTs B received a second time.
    pub duplicates: u64,
    /// PUTs B received with other bytes than sent.
    pub corrupted: u64,
    /// The first duplicated and corrupted sequence numbers.
    pub duplicate_examples: Vec<u64>,
    /// The first corrupted sequence numbers.
    pub corrupted_examples: Vec<u64>,
    /// State comparisons made (after each restart and at the end).
    pub state_checks: u64,
    /// Those that differed, with what differed.
    pub state_mismatches: Vec<String>,
    /// API changes answered otherwise than acknowledged (or not answered).
    pub api_refusals: Vec<String>,
    /// Routers found dead (not killed by the schedule).
    pub dead_routers: Vec<String>,
    /// Panics found in the routers' logs (a line each).
    pub panics: Vec<String>,
    /// Seconds from the end of the repairs to the first PUT ACKed; `None`: none within the
    /// bound.
    pub recovered_s: Option<f64>,
}

impl Summary {
    /// An empty summary of the run of `seed` over `minutes`, every kind of action at 0.
    pub fn new(seed: u64, minutes: f64, steps: Option<u64>) -> Summary {
        Summary {
            seed,
            minutes,
            steps,
            actions: KINDS.iter().map(|k| ((*k).to_owned(), 0)).collect(),
            ..Summary::default()
        }
    }

    /// Counts an action of kind `kind` ([`KINDS`] index).
    pub fn count_action(&mut self, kind: usize) {
        if let Some(n) = KINDS.get(kind).and_then(|k| self.actions.get_mut(*k)) {
            *n += 1;
        }
    }

    /// Counts an API change's outcome (an unexcused one is also an error, counted by the
    /// caller).
    pub fn count_api(&mut self, o: &ApiOutcome) {
        match o {
            ApiOutcome::Acked => self.api_acked += 1,
            ApiOutcome::Nothing(_) => self.api_nothing += 1,
            ApiOutcome::Unanswered {
                sent: false,
                excused: true,
                ..
            } => self.api_not_sent += 1,
            ApiOutcome::Unanswered {
                sent: true,
                excused: true,
                ..
            } => self.api_unsure += 1,
            ApiOutcome::Unanswered { .. } | ApiOutcome::Refused(_) => {}
        }
    }

    /// Counts the unsure changes a comparison settled.
    pub fn count_settled(&mut self, settled: &[(String, bool)]) {
        for (_, made) in settled {
            if *made {
                self.unsure_made += 1;
            } else {
                self.unsure_not_made += 1;
            }
        }
    }

    /// The broken invariants, each a sentence; empty when the run passed.
    pub fn violations(&self) -> Vec<String> {
        let t = &self.traffic;
        let mut v = Vec::new();
        if t.hung > 0 || t.open > 0 || t.lost > 0 {
            v.push(format!(
                "transactions did not end: {} hung past their timeout, {} still open, {} lost their events",
                t.hung, t.open, t.lost
            ));
        }
        if self.duplicates > 0 {
            v.push(format!(
                "{} PUTs delivered twice to B (hdr_data {:?})",
                self.duplicates, self.duplicate_examples
            ));
        }
        if self.corrupted > 0 || t.mismatch > 0 {
            v.push(format!(
                "payloads not intact: {} PUTs at B (hdr_data {:?}), {} GET REPLYs at A",
                self.corrupted, self.corrupted_examples, t.mismatch
            ));
        }
        if t.refused > 0 {
            v.push(format!("{} transactions refused by A", t.refused));
        }
        if !self.state_mismatches.is_empty() {
            v.push(format!(
                "router state differs from the changes acknowledged: {}",
                self.state_mismatches.join(" | ")
            ));
        }
        if !self.api_refusals.is_empty() {
            v.push(format!(
                "API changes not acknowledged: {}",
                self.api_refusals.join(" | ")
            ));
        }
        if !self.dead_routers.is_empty() {
            v.push(format!("routers died: {}", self.dead_routers.join(", ")));
        }
        if !self.panics.is_empty() {
            v.push(format!(
                "panics in router logs: {}",
                self.panics.join(" | ")
            ));
        }
        if self.recovered_s.is_none() {
            v.push("no PUT was ACKed after every failure was repaired".to_owned());
        }
        v
    }

    /// Prints the summary.
    pub fn print(&self) {
        let t = &self.traffic;
        let actions: Vec<String> = KINDS
            .iter()
            .map(|k| format!("{k} {}", self.actions.get(*k).copied().unwrap_or(0)))
            .collect();
        println!(
            "chaos: seed {} ({} asked, {:.1} s run): actions: {}; restarts {}",
            self.seed,
            self.steps
                .map_or_else(|| format!("{} min", self.minutes), |n| format!("{n} steps")),
            self.elapsed_s,
            actions.join(", "),
            self.restarts
        );
        println!("chaos: the schedule overlaps: {}", self.overlaps);
        println!(
            "chaos: API changes acknowledged {}, nothing to do {}, not sent (router down) {}, answer lost (router killed) {}: made {}, not made {}",
            self.api_acked,
            self.api_nothing,
            self.api_not_sent,
            self.api_unsure,
            self.unsure_made,
            self.unsure_not_made
        );
        println!(
            "chaos: PUT sent {} ok {} failed {}; GET sent {} ok {} failed {}; refused {}, lost {}, hung {}, open {}; longest {:.2} s",
            t.put.sent, t.put.ok, t.put.failed, t.get.sent, t.get.ok, t.get.failed,
            t.refused, t.lost, t.hung, t.open, t.longest_s
        );
        println!(
            "chaos: B received {} PUTs: duplicates {}, corrupted {}; GET REPLYs wrong {}",
            self.delivered, self.duplicates, self.corrupted, t.mismatch
        );
        println!(
            "chaos: state checks {}, mismatches {}; API changes not acknowledged {}; dead routers {}; panics {}; recovered {}",
            self.state_checks,
            self.state_mismatches.len(),
            self.api_refusals.len(),
            self.dead_routers.len(),
            self.panics.len(),
            self.recovered_s
                .map_or_else(|| "never".to_owned(), |s| format!("after {s:.2} s"))
        );
        for (why, n) in &t.failure_reasons {
            println!("chaos: failure events: {why}: {n}");
        }
    }
}

/// The lines of a router's log that tell of a panic (at most 8).
pub fn panics_in(log: &Path, router: &str) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("panicked at") || l.contains("RUST_BACKTRACE"))
        .take(8)
        .map(|l| format!("{router}: {l}"))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_run_passes_and_each_broken_invariant_is_named() {
        let mut s = Summary {
            recovered_s: Some(0.5),
            ..Summary::new(1, 1.0, None)
        };
        s.count_action(0);
        assert!(s.violations().is_empty(), "{:?}", s.violations());
        s.duplicates = 1;
        s.duplicate_examples = vec![42];
        s.traffic.hung = 2;
        s.panics = vec!["R1: thread 'x' panicked at".to_owned()];
        let v = s.violations().join("\n");
        assert!(v.contains("delivered twice") && v.contains("[42]"), "{v}");
        assert!(v.contains("2 hung"), "{v}");
        assert!(v.contains("panics"), "{v}");
        assert_eq!(s.actions.get("kill"), Some(&1));
        assert_eq!(s.actions.get("route_del"), Some(&0));
    }

    #[test]
    fn a_panic_line_in_a_log_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(
            &log,
            "WARN x\nthread 'main' panicked at src/a.rs:1:2:\nboom\nnote: run with `RUST_BACKTRACE=1`\n",
        )
        .unwrap();
        assert_eq!(panics_in(&log, "R2").len(), 2);
        assert!(panics_in(&dir.path().join("none"), "R2").is_empty());
    }
}
