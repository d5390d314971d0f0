//! The chaos schedule: a list of actions on the routers, each with its start time, derived
//! from the seed and the span alone, so that a seed replays the same list and the same
//! overlaps. Actions start 0.3 to 2.5 s apart whatever the failures earlier ones still
//! hold: a router may be killed while another is down or has its link down, an API change
//! may go to a killed router, and one kill in three drawn right after an API change hits
//! that change's router within [`RACE_MS`], while its request may be under way; one
//! failure in three drawn while another is held starts 0.1 to 0.6 s after the previous
//! action. One failure at a time per router
//! (the next goes to a router that is not failed); the failure that takes the last router
//! out is held 0.2 to 1.2 s.
//!
//! The generator keeps a model of what the schedule did so far (the remote nets each
//! router has a route to, the fault rules each holds) so that a deletion always names
//! something an earlier action added; an action that cannot apply (a deletion with
//! nothing to delete, a fourth fault rule on a router) is replaced by its opposite.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::soak::traffic::Rng;

/// The routers of a chaos run.
pub const ROUTERS: usize = 3;

/// The extra remote nets routes are added to and deleted from: `tcp10` to `tcp17`.
pub const FIRST_REMOTE_NET: u32 = 10;
/// How many of them.
pub const REMOTE_NETS: u32 = 8;

/// Most fault rules one router holds at a time.
const MAX_FAULT_RULES: usize = 2;

/// Which of a router's two NIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The NI on tcp (end node A's net; loopback).
    Tcp,
    /// The NI on tcp1 (end node B's net; a veth in the namespace).
    Tcp1,
}

impl Side {
    /// The net's name.
    pub fn net(self) -> &'static str {
        match self {
            Side::Tcp => "tcp",
            Side::Tcp1 => "tcp1",
        }
    }
}

/// A fault rule the schedule adds (on every message through the NI, any source and
/// destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Drop one message in `rate` (on average).
    Drop {
        /// 1 in this many.
        rate: u32,
    },
    /// Delay one message in `rate` by `latency_ms`.
    Delay {
        /// Milliseconds.
        latency_ms: u32,
        /// 1 in this many.
        rate: u32,
    },
}

impl Fault {
    /// The rule in the JSON form `POST /api/v1/nis/{nid}/fault-rules` takes.
    pub fn rule_json(self, seed: u64) -> serde_json::Value {
        match self {
            Fault::Drop { rate } => serde_json::json!({
                "kind": "drop", "source": "*", "dest": "*",
                "trigger": {"rate": rate}, "seed": seed,
            }),
            Fault::Delay { latency_ms, rate } => serde_json::json!({
                "kind": {"delay": {"latency_ms": latency_ms}}, "source": "*", "dest": "*",
                "trigger": {"rate": rate}, "seed": seed,
            }),
        }
    }
}

/// One thing done to a router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL the router's process, leave it down for `down_ms`, start it again.
    Kill {
        /// Router index.
        router: usize,
        /// Milliseconds down.
        down_ms: u64,
    },
    /// Set the link of the router's tcp1 interface down for `down_ms`, then up.
    LinkFlap {
        /// Router index.
        router: usize,
        /// Milliseconds down.
        down_ms: u64,
    },
    /// Add a fault rule on one of the router's NIs.
    FaultAdd {
        /// Router index.
        router: usize,
        /// Which NI.
        side: Side,
        /// What it does.
        fault: Fault,
        /// The rule's own generator seed.
        seed: u64,
    },
    /// Delete the oldest fault rule the router holds.
    FaultDel {
        /// Router index.
        router: usize,
    },
    /// Reset health to full: the router's local NIs, or every peer NI it knows.
    HealthReset {
        /// Router index.
        router: usize,
        /// Peer NIs (else local NIs).
        peers: bool,
    },
    /// Add a route to `tcpN` through a gateway on tcp.
    RouteAdd {
        /// Router index.
        router: usize,
        /// N of `tcpN`.
        net: u32,
        /// Hops.
        hop: u32,
        /// Priority.
        priority: u32,
    },
    /// Delete the route to `tcpN`.
    RouteDel {
        /// Router index.
        router: usize,
        /// N of `tcpN`.
        net: u32,
    },
}

/// The kinds of action, for the tallies.
pub const KINDS: [&str; 7] = [
    "kill",
    "link_flap",
    "fault_add",
    "fault_del",
    "health_reset",
    "route_add",
    "route_del",
];

impl Action {
    /// The router acted on.
    pub fn router(self) -> usize {
        match self {
            Action::Kill { router, .. }
            | Action::LinkFlap { router, .. }
            | Action::FaultAdd { router, .. }
            | Action::FaultDel { router }
            | Action::HealthReset { router, .. }
            | Action::RouteAdd { router, .. }
            | Action::RouteDel { router, .. } => router,
        }
    }

    /// Its kind's index in [`KINDS`].
    pub fn kind(self) -> usize {
        match self {
            Action::Kill { .. } => 0,
            Action::LinkFlap { .. } => 1,
            Action::FaultAdd { .. } => 2,
            Action::FaultDel { .. } => 3,
            Action::HealthReset { .. } => 4,
            Action::RouteAdd { .. } => 5,
            Action::RouteDel { .. } => 6,
        }
    }

    /// Whether it is a change through the router's API.
    pub fn is_api_change(self) -> bool {
        !matches!(self, Action::Kill { .. } | Action::LinkFlap { .. })
    }

    /// How long the action holds a failure, by the schedule (not counting the time a
    /// restart takes).
    pub fn hold_ms(self) -> u64 {
        match self {
            Action::Kill { down_ms, .. } | Action::LinkFlap { down_ms, .. } => down_ms,
            _ => 0,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.router() + 1;
        match *self {
            Action::Kill { down_ms, .. } => write!(f, "kill -9 R{r}, restart after {down_ms} ms"),
            Action::LinkFlap { down_ms, .. } => {
                write!(f, "link of R{r}'s tcp1 interface down for {down_ms} ms")
            }
            Action::FaultAdd {
                side, fault, seed, ..
            } => match fault {
                Fault::Drop { rate } => {
                    write!(
                        f,
                        "fault rule on R{r} {}: drop 1 in {rate} (seed {seed})",
                        side.net()
                    )
                }
                Fault::Delay { latency_ms, rate } => write!(
                    f,
                    "fault rule on R{r} {}: delay 1 in {rate} by {latency_ms} ms (seed {seed})",
                    side.net()
                ),
            },
            Action::FaultDel { .. } => write!(f, "delete R{r}'s oldest fault rule"),
            Action::HealthReset { peers, .. } => write!(
                f,
                "reset the health of R{r}'s {}",
                if peers { "peer NIs" } else { "local NIs" }
            ),
            Action::RouteAdd {
                net, hop, priority, ..
            } => write!(
                f,
                "add R{r}'s route to tcp{net} (hop {hop}, priority {priority})"
            ),
            Action::RouteDel { net, .. } => write!(f, "delete R{r}'s route to tcp{net}"),
        }
    }
}

/// One step: an action and when it starts. Steps start at their time whether or not the
/// failures earlier steps hold are over: a kill, a link flap and API changes may be under
/// way at once, on one router or several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Milliseconds from the start of the schedule to the action.
    pub at_ms: u64,
    /// The action.
    pub action: Action,
    /// The failures held when it starts (by the schedule; the routers' own restart times
    /// are not replayed).
    pub held: Held,
    /// A kill started [`RACE_MS`] or less after an API change to the same router: it may
    /// cut that change's request short.
    pub races: bool,
}

/// Which routers a step finds failed when it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// Killed (from the kill until [`RESTART_ALLOWANCE_MS`] after the restart is due).
    pub killed: [bool; ROUTERS],
    /// With their tcp1 link down.
    pub link_down: [bool; ROUTERS],
}

impl Held {
    /// How many routers are failed (killed or with their link down).
    pub fn failed(&self) -> usize {
        self.killed
            .iter()
            .zip(self.link_down.iter())
            .filter(|(k, l)| **k || **l)
            .count()
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (i, (k, l)) in self.killed.iter().zip(self.link_down.iter()).enumerate() {
            if *k {
                parts.push(format!("R{} down", i + 1));
            }
            if *l {
                parts.push(format!("R{} link down", i + 1));
            }
        }
        if parts.is_empty() {
            write!(f, "nothing held")
        } else {
            write!(f, "{}", parts.join(", "))
        }
    }
}

/// The time a killed router is counted down past its restart (for its restart and for
/// the end nodes' router checks to see it again): the schedule starts no other failure on
/// it before then.
pub const RESTART_ALLOWANCE_MS: u64 = 1000;

/// A kill that races an API change starts at most this many milliseconds after it.
pub const RACE_MS: u64 = 40;

/// The failure that takes the last router out is held 200 ms to this many more.
const LAST_ROUTER_HOLD_MS: u64 = 1000;

/// What the schedule of a seed overlaps, counted from its steps alone (the same for every
/// run of the seed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Overlaps {
    /// Kills started while another router was killed.
    pub kill_while_killed: u64,
    /// Kills started while another router's link was down.
    pub kill_while_link_down: u64,
    /// Link flaps started while another router was killed.
    pub flap_while_killed: u64,
    /// Link flaps started while another router's link was down.
    pub flap_while_link_down: u64,
    /// API changes started while their router was killed (and not yet restarted).
    pub api_to_killed: u64,
    /// Kills started [`RACE_MS`] or less after an API change to the same router.
    pub kill_racing_api: u64,
    /// Times every router was failed at once.
    pub all_failed: u64,
    /// Milliseconds every router was failed at once, in all.
    pub all_failed_ms: u64,
}

/// What the generator knows of each router.
#[derive(Debug, Default, Clone)]
struct Planned {
    nets: BTreeSet<u32>,
    fault_rules: usize,
}

impl fmt::Display for Overlaps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kills while another router is down {}, while another's link is down {}; link \
             flaps while another router is down {}, while another's link is down {}; API \
             changes to a killed router {}, kills racing an API change {}; every router \
             down {} times, {:.1} s in all",
            self.kill_while_killed,
            self.kill_while_link_down,
            self.flap_while_killed,
            self.flap_while_link_down,
            self.api_to_killed,
            self.kill_racing_api,
            self.all_failed,
            self.all_failed_ms as f64 / 1000.0
        )
    }
}

/// The schedule of a seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The seed.
    pub seed: u64,
    /// The steps, in the order they start.
    pub steps: Vec<Step>,
}

impl Schedule {
    /// The steps of `seed` whose held failures end within `span` (the last one's end at
    /// most `span` after the first start), or (with `steps`) exactly that many steps.
    pub fn generate(seed: u64, span: Duration, steps: Option<u64>) -> Schedule {
        let mut rng = Rng::new(seed);
        let mut planned: Vec<Planned> = vec![Planned::default(); ROUTERS];
        let budget = u64::try_from(span.as_millis()).unwrap_or(u64::MAX);
        // Per router: the kill and the link flap held, as (kind, until).
        let mut until = [(Failure::Killed, 0u64); ROUTERS];
        let mut at = 0u64;
        let mut out: Vec<Step> = Vec::new();
        loop {
            if steps.is_some_and(|n| u64::try_from(out.len()).unwrap_or(u64::MAX) >= n) {
                break;
            }
            let pause_ms = 300 + rng.below(2200);
            // Most races within a few milliseconds, while the request is on its way.
            let race_ms = rng.below(RACE_MS + 1) / (1 + rng.below(4));
            let router = usize::try_from(rng.below(ROUTERS as u64)).unwrap_or(0);
            let at_once = rng.below(3) == 0;
            let Some(p) = planned.get_mut(router) else {
                break;
            };
            let mut action = draw(&mut rng, router, p);
            let mut start = at.saturating_add(pause_ms);
            let mut races = false;
            if let (true, Action::Kill { down_ms, .. }, Some(prev)) = (at_once, action, out.last())
            {
                if prev.action.is_api_change() {
                    // One kill in three hits the router of the previous action, an API
                    // change, while its request may be under way: what it acknowledged
                    // must survive, what it did not must not appear.
                    start = prev.at_ms.saturating_add(race_ms);
                    races = true;
                    action = Action::Kill {
                        router: prev.action.router(),
                        down_ms,
                    };
                }
            }
            if let (true, Action::Kill { .. } | Action::LinkFlap { .. }, false) =
                (at_once, action, races)
            {
                if held_at(&until, at).failed() > 0 {
                    // One failure in three that comes while another is held follows it
                    // closely: failures pile up.
                    start = at.saturating_add(100 + pause_ms % 500);
                }
            }
            let held = held_at(&until, start);
            if let Action::Kill { down_ms, .. } | Action::LinkFlap { down_ms, .. } = action {
                // One failure at a time per router: a failed router's next one goes to the
                // next router that is not failed; with every router failed, the API
                // change to the failed router (its health reset) instead.
                let free = (0..ROUTERS)
                    .map(|k| (action.router() + k) % ROUTERS)
                    .find(|q| {
                        !held.killed.get(*q).copied().unwrap_or(true)
                            && !held.link_down.get(*q).copied().unwrap_or(true)
                    });
                let last = held.failed() + 1 >= ROUTERS;
                // The last router out: held briefly, so that traffic mostly flows.
                let hold = if last {
                    200 + down_ms % LAST_ROUTER_HOLD_MS
                } else {
                    down_ms
                };
                action = match (free, action) {
                    (None, _) => {
                        races = false;
                        Action::HealthReset {
                            router: action.router(),
                            peers: down_ms % 2 == 0,
                        }
                    }
                    (Some(q), Action::Kill { .. }) => Action::Kill {
                        router: q,
                        down_ms: hold,
                    },
                    (Some(q), _) => Action::LinkFlap {
                        router: q,
                        down_ms: hold,
                    },
                };
                if action.router() != prev_router(&out, races) {
                    races = false;
                }
            }
            let r = action.router();
            let end = start.saturating_add(action.hold_ms());
            if steps.is_none() && end > budget {
                break;
            }
            match action {
                Action::Kill { down_ms, .. } => {
                    if let Some(u) = until.get_mut(r) {
                        *u = (
                            Failure::Killed,
                            start.saturating_add(down_ms + RESTART_ALLOWANCE_MS),
                        );
                    }
                }
                Action::LinkFlap { down_ms, .. } => {
                    if let Some(u) = until.get_mut(r) {
                        *u = (Failure::LinkDown, start.saturating_add(down_ms));
                    }
                }
                _ => {}
            }
            at = at.max(start);
            out.push(Step {
                at_ms: start,
                action,
                held,
                races,
            });
        }
        Schedule { seed, steps: out }
    }

    /// What the schedule overlaps.
    pub fn overlaps(&self) -> Overlaps {
        let mut o = Overlaps::default();
        // (time, +1 or -1): the failures' starts and ends, for the times all are failed.
        let mut edges: Vec<(u64, i64)> = Vec::new();
        for s in &self.steps {
            let r = s.action.router();
            let others_killed = s.held.killed.iter().enumerate().any(|(i, k)| *k && i != r);
            let others_link = s
                .held
                .link_down
                .iter()
                .enumerate()
                .any(|(i, l)| *l && i != r);
            match s.action {
                Action::Kill { down_ms, .. } => {
                    o.kill_while_killed += u64::from(others_killed);
                    o.kill_while_link_down += u64::from(others_link);
                    o.kill_racing_api += u64::from(s.races);
                    edges.push((s.at_ms, 1));
                    edges.push((s.at_ms + down_ms + RESTART_ALLOWANCE_MS, -1));
                }
                Action::LinkFlap { down_ms, .. } => {
                    o.flap_while_killed += u64::from(others_killed);
                    o.flap_while_link_down += u64::from(others_link);
                    edges.push((s.at_ms, 1));
                    edges.push((s.at_ms + down_ms, -1));
                }
                a if a.is_api_change() => {
                    o.api_to_killed += u64::from(s.held.killed.get(r).copied().unwrap_or(false));
                }
                _ => {}
            }
        }
        // Ends before starts at the same time: touching failures do not overlap.
        edges.sort_unstable();
        let (mut failed, mut since) = (0i64, 0u64);
        for (t, d) in edges {
            let before = failed;
            failed += d;
            if before < ROUTERS as i64 && failed >= ROUTERS as i64 {
                o.all_failed += 1;
                since = t;
            } else if before >= ROUTERS as i64 && failed < ROUTERS as i64 {
                o.all_failed_ms += t - since;
            }
        }
        o
    }
}

/// The router a racing kill must hit: the previous step's (any router when not racing).
fn prev_router(out: &[Step], races: bool) -> usize {
    match (races, out.last()) {
        (true, Some(p)) => p.action.router(),
        _ => usize::MAX,
    }
}

/// What holds a router failed in the generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Killed,
    LinkDown,
}

/// The failures held at `t`, from each router's last one and its end.
fn held_at(until: &[(Failure, u64); ROUTERS], t: u64) -> Held {
    let mut h = Held::default();
    for (i, (kind, end)) in until.iter().enumerate() {
        if *end > t {
            let slot = match kind {
                Failure::Killed => h.killed.get_mut(i),
                Failure::LinkDown => h.link_down.get_mut(i),
            };
            if let Some(s) = slot {
                *s = true;
            }
        }
    }
    h
}

/// One of `choices`, evenly.
fn pick(rng: &mut Rng, choices: &[u32]) -> u32 {
    let i = usize::try_from(rng.below(choices.len() as u64)).unwrap_or(0);
    choices.get(i).copied().unwrap_or(0)
}

fn draw(rng: &mut Rng, router: usize, p: &mut Planned) -> Action {
    let roll = rng.below(100);
    // The fields are drawn whatever the kind, so that the draws stay in step.
    let down_ms = 200 + rng.below(2800);
    let side = if rng.below(2) == 0 {
        Side::Tcp
    } else {
        Side::Tcp1
    };
    let fault = if rng.below(2) == 0 {
        Fault::Drop {
            rate: pick(rng, &[5, 10, 20]),
        }
    } else {
        Fault::Delay {
            latency_ms: 100 + u32::try_from(rng.below(1400)).unwrap_or(0),
            rate: pick(rng, &[2, 5, 10]),
        }
    };
    let rule_seed = 1 + rng.below(1 << 31);
    let net = FIRST_REMOTE_NET + u32::try_from(rng.below(u64::from(REMOTE_NETS))).unwrap_or(0);
    let hop = 1 + u32::try_from(rng.below(4)).unwrap_or(0);
    let priority = u32::try_from(rng.below(8)).unwrap_or(0);
    let peers = rng.below(2) == 0;
    let fault_add = Action::FaultAdd {
        router,
        side,
        fault,
        seed: rule_seed,
    };
    match roll {
        0..=13 => Action::Kill { router, down_ms },
        14..=27 => Action::LinkFlap { router, down_ms },
        28..=55 => {
            // Fault rules: added while the router holds fewer than the most, else deleted;
            // deleted when it holds some, else added.
            let add = if p.fault_rules >= MAX_FAULT_RULES {
                false
            } else if p.fault_rules == 0 {
                true
            } else {
                roll < 44
            };
            if add {
                p.fault_rules += 1;
                fault_add
            } else {
                p.fault_rules = p.fault_rules.saturating_sub(1);
                Action::FaultDel { router }
            }
        }
        56..=67 => Action::HealthReset { router, peers },
        _ => {
            // Routes: the drawn net is added when the router has no route to it, else
            // deleted.
            if p.nets.insert(net) {
                Action::RouteAdd {
                    router,
                    net,
                    hop,
                    priority,
                }
            } else {
                p.nets.remove(&net);
                Action::RouteDel { router, net }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_schedule_and_another_seed_another() {
        let span = Duration::from_secs(600);
        let a = Schedule::generate(42, span, None);
        assert_eq!(a, Schedule::generate(42, span, None));
        assert_ne!(a.steps, Schedule::generate(43, span, None).steps);
        let kinds: BTreeSet<usize> = a.steps.iter().map(|s| s.action.kind()).collect();
        assert_eq!(
            kinds.len(),
            KINDS.len(),
            "every kind of action in 10 minutes"
        );
    }

    #[test]
    fn the_span_bounds_the_held_failures_and_steps_start_in_order() {
        let s = Schedule::generate(7, Duration::from_secs(60), None);
        assert!(!s.steps.is_empty());
        for w in s.steps.windows(2) {
            assert!(w[0].at_ms <= w[1].at_ms, "{w:?}");
        }
        for step in &s.steps {
            assert!(step.at_ms + step.action.hold_ms() <= 60_000, "{step:?}");
        }
        assert_eq!(
            Schedule::generate(7, Duration::ZERO, Some(25)).steps.len(),
            25
        );
    }

    #[test]
    fn failures_overlap_across_routers_but_not_on_one() {
        let s = Schedule::generate(3, Duration::from_secs(3600), None);
        let o = s.overlaps();
        assert_eq!(
            o,
            Schedule::generate(3, Duration::from_secs(3600), None).overlaps()
        );
        assert!(o.kill_while_killed > 0, "{o:?}");
        assert!(
            o.kill_while_link_down > 0 && o.flap_while_killed > 0,
            "{o:?}"
        );
        assert!(o.api_to_killed > 0, "{o:?}");
        assert!(o.all_failed > 0, "{o:?}");
        // Rare: every router failed at once for a few percent of the time at most.
        assert!(o.all_failed_ms * 20 < 3_600_000, "{o:?}");
        for step in &s.steps {
            let r = step.action.router();
            if matches!(step.action, Action::Kill { .. } | Action::LinkFlap { .. }) {
                assert!(!step.held.killed[r] && !step.held.link_down[r], "{step:?}");
                if step.held.failed() == ROUTERS - 1 {
                    assert!(
                        step.action.hold_ms() < 200 + LAST_ROUTER_HOLD_MS,
                        "{step:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn some_kills_race_an_api_change_to_their_router() {
        let s = Schedule::generate(5, Duration::from_secs(3600), None);
        let racing: Vec<(Step, Step)> = s
            .steps
            .windows(2)
            .filter(|w| w[1].races)
            .map(|w| (w[0], w[1]))
            .collect();
        assert!(!racing.is_empty());
        assert_eq!(racing.len() as u64, s.overlaps().kill_racing_api);
        for (prev, kill) in racing {
            assert!(matches!(kill.action, Action::Kill { .. }), "{kill:?}");
            assert!(prev.action.is_api_change(), "{prev:?}");
            assert_eq!(kill.action.router(), prev.action.router());
            assert!(kill.at_ms - prev.at_ms <= RACE_MS);
        }
    }

    #[test]
    fn deletions_name_what_was_added_before() {
        let s = Schedule::generate(9, Duration::from_secs(3600), None);
        let mut nets: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); ROUTERS];
        let mut rules = [0usize; ROUTERS];
        for step in &s.steps {
            match step.action {
                Action::RouteAdd { router, net, .. } => assert!(nets[router].insert(net)),
                Action::RouteDel { router, net } => assert!(nets[router].remove(&net)),
                Action::FaultAdd { router, .. } => {
                    rules[router] += 1;
                    assert!(rules[router] <= MAX_FAULT_RULES);
                }
                Action::FaultDel { router } => {
                    assert!(rules[router] > 0);
                    rules[router] -= 1;
                }
                _ => {}
            }
        }
    }
}
