//! The chaos schedule: a list of actions on the routers, each after a pause, derived from
//! the seed and the span alone, so that a seed replays the same list.
//!
//! The generator keeps a model of what the schedule did so far (the remote nets each
//! router has a route to, the fault rules each holds) so that a deletion always names
//! something an earlier action added; an action that cannot apply (a deletion with
//! nothing to delete, a fourth fault rule on a router) is replaced by its opposite.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

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

    /// How long the action holds a failure, by the schedule (not counting the time a
    /// restart takes).
    fn hold_ms(self) -> u64 {
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

/// One step: a pause, then an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Milliseconds to wait before the action.
    pub pause_ms: u64,
    /// The action.
    pub action: Action,
}

/// What the generator knows of each router.
#[derive(Debug, Default, Clone)]
struct Planned {
    nets: BTreeSet<u32>,
    fault_rules: usize,
}

/// The schedule of a seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The seed.
    pub seed: u64,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Schedule {
    /// The steps of `seed` whose pauses and held failures add up to at most `span`, or
    /// (with `steps`) exactly that many steps.
    pub fn generate(seed: u64, span: Duration, steps: Option<u64>) -> Schedule {
        let mut rng = Rng::new(seed);
        let mut planned: Vec<Planned> = vec![Planned::default(); ROUTERS];
        let budget = u64::try_from(span.as_millis()).unwrap_or(u64::MAX);
        let mut used = 0u64;
        let mut out = Vec::new();
        loop {
            if steps.is_some_and(|n| u64::try_from(out.len()).unwrap_or(u64::MAX) >= n) {
                break;
            }
            let mut pause_ms = 300 + rng.below(2200);
            let router = usize::try_from(rng.below(ROUTERS as u64)).unwrap_or(0);
            let at_once = rng.below(3) == 0;
            let Some(p) = planned.get_mut(router) else {
                break;
            };
            let mut action = draw(&mut rng, router, p);
            if let (true, Action::Kill { down_ms, .. }, Some(prev)) = (
                at_once,
                action,
                out.last().map(|s: &Step| s.action.router()),
            ) {
                // One kill in three hits the router of the previous action right after
                // it (an API change, perhaps): what it acknowledged must survive.
                pause_ms = 0;
                action = Action::Kill {
                    router: prev,
                    down_ms,
                };
            }
            let cost = pause_ms.saturating_add(action.hold_ms());
            if steps.is_none() && used.saturating_add(cost) > budget {
                break;
            }
            used = used.saturating_add(cost);
            out.push(Step { pause_ms, action });
        }
        Schedule { seed, steps: out }
    }
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
    fn the_span_bounds_the_pauses_and_held_failures() {
        let s = Schedule::generate(7, Duration::from_secs(60), None);
        let total: u64 = s
            .steps
            .iter()
            .map(|s| s.pause_ms + s.action.hold_ms())
            .sum();
        assert!(total <= 60_000 && !s.steps.is_empty(), "{total}");
        assert_eq!(
            Schedule::generate(7, Duration::ZERO, Some(25)).steps.len(),
            25
        );
    }

    #[test]
    fn some_kills_hit_the_previous_actions_router_at_once() {
        let s = Schedule::generate(5, Duration::from_secs(3600), None);
        let at_once: Vec<(Step, Step)> = s
            .steps
            .windows(2)
            .filter(|w| w[1].pause_ms == 0)
            .map(|w| (w[0], w[1]))
            .collect();
        assert!(!at_once.is_empty());
        for (prev, kill) in at_once {
            assert!(matches!(kill.action, Action::Kill { .. }), "{kill:?}");
            assert_eq!(kill.action.router(), prev.action.router());
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
