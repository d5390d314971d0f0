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
//!   life, and a quiet net is probed (the caller pings the peer NI [`NetLiveness::tick`]
//!   names). UP as soon as anything arrives.
//! * [`NetCheckMode::Off`]: nets are always UP (as when routing is off).
//!
//! The active rule, with `P` the probe interval and `D` the DOWN time:
//!
//! * Probes are per net, never per peer: at most one is in flight, and one not answered
//!   within `P` is lost. Anything that arrives while a probe is in flight answers it.
//! * A net is probed once it has been silent for its current interval: `P` at first,
//!   doubled by each answered probe up to [`MAX_PROBE_BACKOFF`] doublings (16 `P`), and
//!   back to `P` whenever something arrives with no probe in flight (the net carries
//!   traffic) or the net comes UP. A busy net is never probed; a quiet net that answers
//!   costs one probe per 16 `P` (8 s by default).
//! * Once a probe is lost the next goes out at once; the net is DOWN once its first
//!   unanswered probe has waited `D - P` and the probes to two different peer NIs were
//!   lost in a row (one, when the net has one peer NI). Probes stay on the peer NI that
//!   answered last and move to the next one (in the caller's order) only when one is lost,
//!   so one dead peer NI cannot make a net DOWN while another answers.
//! * A net without a known peer NI cannot be probed, and having nobody to hear from is
//!   no sign of a dead net: its status does not change, and its silence only counts from
//!   its first probe.
//!
//! So a net that carried traffic until it fell silent is probed after `P` (500 ms) and
//! DOWN after `D` (1.5 s), as long as it stays silent; a net that was quiet (only probes
//! answered) is found within 16 `P` + `D` - `P`.

use crate::time::Millis;

/// The most doublings of the probe interval of a quiet net that answers its probes.
pub const MAX_PROBE_BACKOFF: u32 = 4;

/// How many peer NIs must have lost a probe in a row before a net is DOWN (at most the
/// number it has).
const LOST_PEERS_FOR_DOWN: usize = 2;

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
    /// Probe a quiet net and mark it DOWN when its probes go unanswered (the rule is in
    /// the module documentation).
    Active {
        /// How long a net may be silent before its first probe (before backing off), and
        /// how long a probe waits for its answer.
        probe_interval: Millis,
        /// How long a net may stay silent, counted from one probe interval before its
        /// first probe, before it is DOWN.
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
    /// Ping a peer NI on the net now: its position (modulo their number) in the caller's
    /// fixed order of the net's peer NIs.
    pub probe: Option<usize>,
}

/// The liveness of one local net.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetLiveness {
    last_heard: Millis,
    down: bool,
    /// Doublings of the probe interval: answered probes since the net last carried
    /// traffic.
    backoff: u32,
    /// When the probe in flight was sent.
    in_flight: Option<Millis>,
    /// When the first probe of the current silence was sent.
    first_probe: Option<Millis>,
    /// Probes of the current silence lost in a row, each to another peer NI.
    lost: usize,
    /// The peer NI probed next.
    next_peer: usize,
}

impl NetLiveness {
    /// A net created at `now`: UP, and its silence counts from now.
    pub const fn new(now: Millis) -> NetLiveness {
        NetLiveness {
            last_heard: now,
            down: false,
            backoff: 0,
            in_flight: None,
            first_probe: None,
            lost: 0,
            next_peer: 0,
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

    /// How long the net may be silent now before it is probed (active mode).
    pub fn probe_interval(&self, mode: NetCheckMode) -> Millis {
        match mode {
            NetCheckMode::Active { probe_interval, .. } => {
                Millis(probe_interval.0.saturating_mul(1 << self.backoff))
            }
            NetCheckMode::Passive { .. } | NetCheckMode::Off => Millis::ZERO,
        }
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
        self.backoff = if self.in_flight.take().is_some() && !self.down {
            (self.backoff + 1).min(MAX_PROBE_BACKOFF)
        } else {
            0
        };
        self.first_probe = None;
        self.lost = 0;
        if self.down {
            self.down = false;
            return Some(NetChange::Up);
        }
        None
    }

    /// Time passed: whether the net is now DOWN, and whether to probe it. `peers`: how
    /// many peer NIs the caller knows on the net.
    pub fn tick(&mut self, now: Millis, mode: NetCheckMode, peers: usize) -> Tick {
        let mut out = Tick::default();
        match mode {
            NetCheckMode::Off => {
                self.down = false;
            }
            NetCheckMode::Passive { down_after } => {
                if !self.down && now.saturating_sub(self.last_heard) >= down_after {
                    self.down = true;
                    out.down = true;
                }
            }
            NetCheckMode::Active {
                probe_interval,
                down_after,
            } => {
                if peers == 0 {
                    self.forget_probes();
                    return out;
                }
                if let Some(sent) = self.in_flight {
                    if now.saturating_sub(sent) >= probe_interval {
                        self.in_flight = None;
                        self.lost += 1;
                        self.next_peer = self.next_peer.wrapping_add(1);
                    }
                }
                let waited = self.first_probe.map(|f| now.saturating_sub(f));
                if !self.down
                    && waited.is_some_and(|w| w >= down_after.saturating_sub(probe_interval))
                    && self.lost >= peers.min(LOST_PEERS_FOR_DOWN)
                {
                    self.down = true;
                    out.down = true;
                }
                let due = self.first_probe.is_some()
                    || now.saturating_sub(self.last_heard) >= self.probe_interval(mode);
                if self.in_flight.is_none() && due {
                    self.in_flight = Some(now);
                    self.first_probe.get_or_insert(now);
                    out.probe = Some(self.next_peer % peers);
                }
            }
        }
        out
    }

    /// The caller could not look at the net for `missed` before `now` (its check ran
    /// that late: whatever arrived meanwhile, a probe's answer too, may not be counted
    /// yet): that time counts neither as silence nor as a probe's wait. A node starved
    /// of CPU does not find its nets silent for it.
    pub fn unobserved(&mut self, now: Millis, missed: Millis) {
        let later = |t: Millis| Millis(t.0.saturating_add(missed.0)).min(now);
        self.last_heard = later(self.last_heard).max(self.last_heard);
        self.in_flight = self.in_flight.map(|t| later(t).max(t));
        self.first_probe = self.first_probe.map(|t| later(t).max(t));
    }

    /// Forget the silence before `now` (e.g. when the mode changes or routing is turned
    /// on), keeping the status.
    pub fn restart(&mut self, now: Millis) {
        self.last_heard = now;
        self.backoff = 0;
        self.forget_probes();
    }

    /// Drops the probes of the current silence.
    fn forget_probes(&mut self) {
        self.in_flight = None;
        self.first_probe = None;
        self.lost = 0;
    }
}

#[cfg(test)]
mod tests;
