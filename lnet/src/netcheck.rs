//! Whether a router's local net is reachable, as its ping info tells peers (reference:
//! core 4.3, health Part 5).
//!
//! Peers on one side of a router use it toward a net on the other side only while its
//! ping info shows an UP NI on that net (asymmetric route failure detection). So a router
//! must show an NI DOWN when its net has gone silent, and UP again as soon as it answers.
//!
//! * [`NetCheckMode::Passive`] is the kernel's rule: a net is DOWN once no ping (an LNet
//!   GET on portal 0 from another node) arrived on it for `alive_router_check_interval +
//!   router_ping_timeout` (110 s by default), UP as soon as one arrives.
//! * [`NetCheckMode::Active`] is faster: anything received on the net counts as a sign of
//!   life; when nothing came for `probe_interval`, the router pings a known peer NI on
//!   that net (the caller does, when [`NetLiveness::tick`] says so); the net is DOWN once
//!   nothing came for `down_after`, UP as soon as anything arrives.
//! * [`NetCheckMode::Off`]: nets are always UP (as when routing is off).
//!
//! A net with no known peer NI cannot be probed; in active mode it stays as it is.

use crate::time::Millis;

/// How a router decides its nets are reachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetCheckMode {
    /// Never DOWN for silence.
    Off,
    /// The kernel's rule: DOWN after `down_after` without an inbound ping.
    Passive {
        /// `alive_router_check_interval + router_ping_timeout` (110 s by default).
        down_after: Millis,
    },
    /// Probe a silent net and mark it DOWN after `down_after` without anything received.
    Active {
        /// How long a net may be silent before it is probed (and between probes).
        probe_interval: Millis,
        /// How long a net may be silent before it is DOWN.
        down_after: Millis,
    },
}

impl NetCheckMode {
    /// The kernel's default passive rule (60 s + 50 s).
    pub const KERNEL: NetCheckMode = NetCheckMode::Passive {
        down_after: Millis::from_secs(110),
    };

    /// The active default: probe after 500 ms of silence, DOWN after 1.5 s.
    pub const ACTIVE: NetCheckMode = NetCheckMode::Active {
        probe_interval: Millis::from_millis(500),
        down_after: Millis::from_millis(1500),
    };
}

/// What was received on a net.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// A ping from another node (a GET on portal 0).
    Ping,
    /// Any other message.
    Other,
}

/// A change of a net's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetChange {
    /// The net became reachable.
    Up,
    /// The net went silent.
    Down,
}

/// What [`NetLiveness::tick`] asks of the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tick {
    /// The net's status changed to DOWN.
    pub down: bool,
    /// Ping a peer NI on the net now.
    pub probe: bool,
}

/// The liveness of one local net.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetLiveness {
    last_heard: Millis,
    last_probe: Option<Millis>,
    down: bool,
}

impl NetLiveness {
    /// A net created at `now`: UP, and its silence counts from now.
    pub const fn new(now: Millis) -> NetLiveness {
        NetLiveness {
            last_heard: now,
            last_probe: None,
            down: false,
        }
    }

    /// Whether the net is DOWN for silence.
    pub const fn is_down(&self) -> bool {
        self.down
    }

    /// When something that counts last arrived.
    pub const fn last_heard(&self) -> Millis {
        self.last_heard
    }

    /// Something arrived on the net at `now`.
    pub fn heard(&mut self, now: Millis, what: Heard, mode: NetCheckMode) -> Option<NetChange> {
        let counts = match mode {
            NetCheckMode::Off => false,
            NetCheckMode::Passive { .. } => what == Heard::Ping,
            NetCheckMode::Active { .. } => true,
        };
        if !counts {
            return None;
        }
        self.last_heard = self.last_heard.max(now);
        if self.down {
            self.down = false;
            return Some(NetChange::Up);
        }
        None
    }

    /// Time passed: whether the net is now DOWN, and whether to probe it. `can_probe`:
    /// the caller knows a peer NI on the net.
    pub fn tick(&mut self, now: Millis, mode: NetCheckMode, can_probe: bool) -> Tick {
        let silent = now.saturating_sub(self.last_heard);
        let mut out = Tick::default();
        match mode {
            NetCheckMode::Off => {
                if self.down {
                    self.down = false;
                }
            }
            NetCheckMode::Passive { down_after } => {
                if !self.down && silent >= down_after {
                    self.down = true;
                    out.down = true;
                }
            }
            NetCheckMode::Active {
                probe_interval,
                down_after,
            } => {
                if !can_probe {
                    return out;
                }
                if !self.down && silent >= down_after && self.last_probe.is_some() {
                    self.down = true;
                    out.down = true;
                }
                let since_probe = self.last_probe.map(|p| now.saturating_sub(p));
                if silent >= probe_interval && since_probe.is_none_or(|s| s >= probe_interval) {
                    self.last_probe = Some(now);
                    out.probe = true;
                }
            }
        }
        out
    }

    /// Forget the silence before `now` (e.g. when the mode changes or routing is turned
    /// on), keeping the status.
    pub fn restart(&mut self, now: Millis) {
        self.last_heard = now;
        self.last_probe = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACTIVE: NetCheckMode = NetCheckMode::Active {
        probe_interval: Millis(500),
        down_after: Millis(1500),
    };

    #[test]
    fn passive_rule_needs_pings_and_takes_110_s() {
        let mode = NetCheckMode::KERNEL;
        let mut n = NetLiveness::new(Millis(0));
        assert_eq!(n.heard(Millis(50_000), Heard::Other, mode), None);
        assert_eq!(n.tick(Millis(109_999), mode, true), Tick::default());
        let t = n.tick(Millis(110_000), mode, true);
        assert!(t.down && !t.probe);
        assert!(n.is_down());
        assert_eq!(n.heard(Millis(111_000), Heard::Other, mode), None);
        assert_eq!(
            n.heard(Millis(112_000), Heard::Ping, mode),
            Some(NetChange::Up)
        );
    }

    #[test]
    fn active_rule_probes_a_silent_net_then_marks_it_down_and_up() {
        let mut n = NetLiveness::new(Millis(0));
        // Traffic keeps it quiet: no probe.
        for t in (100..=1000).step_by(100) {
            n.heard(Millis(t), Heard::Other, ACTIVE);
            assert_eq!(n.tick(Millis(t), ACTIVE, true), Tick::default());
        }
        // Silent since 1000: probes every 500 ms, DOWN at 2500.
        assert_eq!(n.tick(Millis(1400), ACTIVE, true), Tick::default());
        assert!(n.tick(Millis(1500), ACTIVE, true).probe);
        assert!(!n.tick(Millis(1700), ACTIVE, true).probe);
        assert!(n.tick(Millis(2000), ACTIVE, true).probe);
        let t = n.tick(Millis(2500), ACTIVE, true);
        assert!(t.down && t.probe);
        // Still down, still probing, no second DOWN.
        let t = n.tick(Millis(3000), ACTIVE, true);
        assert!(!t.down && t.probe);
        assert_eq!(
            n.heard(Millis(3100), Heard::Other, ACTIVE),
            Some(NetChange::Up)
        );
        assert!(!n.is_down());
    }

    #[test]
    fn a_net_without_known_peers_is_never_marked_down_actively() {
        let mut n = NetLiveness::new(Millis(0));
        assert_eq!(n.tick(Millis(60_000), ACTIVE, false), Tick::default());
        assert!(!n.is_down());
        // Once a peer is known it is probed before it can go DOWN.
        let t = n.tick(Millis(60_100), ACTIVE, true);
        assert!(t.probe && !t.down);
        assert!(n.tick(Millis(60_600), ACTIVE, true).down);
    }

    #[test]
    fn off_mode_brings_a_down_net_back() {
        let mut n = NetLiveness::new(Millis(0));
        assert!(n.tick(Millis(200_000), NetCheckMode::KERNEL, true).down);
        n.tick(Millis(200_001), NetCheckMode::Off, true);
        assert!(!n.is_down());
    }
}
